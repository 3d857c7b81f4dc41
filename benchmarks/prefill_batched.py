"""Prefill through the batched fixed-shape form (``runtime.batched.prefill``): exact vs
decoder trim, eager or replayed from CUDA graphs; ``benchmarks/prefill.py --path batched``.

Why a second path: the engine's prefill is bound by the host on a GPU (per-request
loops, growing caches, syncs), so at 1k tokens of ``mid`` its fixed costs hide what the
trim saves (issue 15). The batched form has fixed shapes and no host syncs; with
``--graphs`` each variant's two segments (encoder, decoder) are captured once per length
and replayed, so a timed call is two graph launches and the ratio is the device work's.

One call = one prefill of B=1 request of N tokens to its last-position logits (no
sampling, no engine). Variants run interleaved (order alternating) on one set of weights;
the ratio of medians comes from one run. With graphs every variant's replayed logits are
also compared with its eager call (``graph_equals_eager``: bit for bit).
"""

from __future__ import annotations

import time
from dataclasses import replace

import torch

from runtime.batched.graphs import CapturedPrefill
from runtime.batched.prefill import BatchedPrefill

VARIANTS = ("exact", "trimmed")


class Call:
    """One variant at one length: ``call()`` -> last-position logits, eager or replayed
    (``runtime.batched.graphs.CapturedPrefill``: captured once here)."""

    def __init__(self, prefill: BatchedPrefill, tokens: torch.Tensor, graphs: bool):
        self.prefill = prefill
        self.tokens = tokens
        self.captured = CapturedPrefill(prefill, tokens) if graphs else None

    def __call__(self) -> torch.Tensor:
        if self.captured is None:
            return self.prefill(self.tokens)
        return self.captured.replay()


def timed(call: Call, cuda: bool) -> tuple[float, float, torch.Tensor]:
    """(wall seconds, process CPU seconds, logits) of one call, the device drained both sides."""
    if cuda:
        torch.cuda.synchronize()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    logits = call()
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - wall0, time.process_time() - cpu0, logits


def measure_length(weights, settings, n: int, gen: torch.Generator, stacked: list | None = None) -> dict:
    """Wall and CPU seconds of every repeat of the exact and trimmed batched prefill of one
    N-token prompt, and (with graphs) whether each replay equals its eager call.
    ``stacked``: grouped-MoE expert stacks to reuse (else made here, once for both)."""
    cuda = settings.device.startswith("cuda")
    config = weights.config
    tokens = torch.randint(3, config.vocab_size, (1, n), generator=gen).to(settings.device)
    exact = BatchedPrefill(weights, trim=False, cut=settings.cut, grouped_moe=settings.moe == "grouped",
                           stacked=stacked)
    trimmed = replace(exact, trim=True, stacked=exact.stacked)  # one copy of the stacked experts
    calls = {v: Call(p, tokens, settings.graphs) for v, p in zip(VARIANTS, (exact, trimmed), strict=True)}
    equal = None
    if settings.graphs:
        equal = {v: bool(torch.equal(timed(calls[v], cuda)[2], calls[v].prefill(tokens))) for v in VARIANTS}
    else:
        for v in VARIANTS:  # warm-up
            timed(calls[v], cuda)
    wall: dict[str, list[float]] = {v: [] for v in VARIANTS}
    cpu: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for r in range(settings.repeats):
        for v in VARIANTS if r % 2 == 0 else VARIANTS[::-1]:
            w, c, _ = timed(calls[v], cuda)
            wall[v].append(w)
            cpu[v].append(c)
    del calls
    if cuda:
        torch.cuda.empty_cache()
    return {"wall": wall, "cpu": cpu, "graph_equals_eager": equal}
