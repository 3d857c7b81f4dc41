"""CUDA graphs of the static decode step, one per batch-size bucket.

Why graphs: a ``mid`` decode step is a few hundred small kernels; launched one by one from
Python the step costs what the launches cost, far above the bytes it moves. Replaying a
captured graph launches them all at once. The step (``runtime.static.step``) is written
for this: fixed shapes per batch size, caches written in place, no host sync.

    graphs = DecodeGraphs(step, slab, buckets=(1, 2, 4, 8, 16, 32, 64))
    logits = graphs(tokens)        # tokens [n] on the device, n <= max(buckets)

A call with ``n`` tokens replays the smallest bucket ``B >= n``: slots ``0..B-1`` step
(the caller keeps slots ``n..B-1`` harmless, see ``runtime.static.model``), and the
logits of slots ``0..n-1`` are returned (a view of the graph's output buffer, valid until
the next replay).

Capture runs the step for real (warm-up on a side stream, as CUDA graph capture
requires), which would advance every slot; the slab's tensors and its host-side
bookkeeping (lists of per-slot counters) are therefore copied before and restored after
capturing, so capturing changes no state. Host code inside the step runs at capture
only, never at replay: whatever host bookkeeping a step does (``DecodeSlab.reserve``)
the caller does before each replay.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

DEFAULT_BUCKETS = (1, 2, 4, 8, 16, 32, 64)
WARMUP_CALLS = 2


def slab_tensors(obj, _seen: set[int] | None = None) -> Iterator[torch.Tensor]:
    """Every tensor an object holds in its attributes (directly, or in lists, tuples and
    dicts), each once: what a step may write."""
    seen = _seen if _seen is not None else set()
    values = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else (
        vars(obj).values() if hasattr(obj, "__dict__") else ())
    for value in values:
        if isinstance(value, torch.Tensor):
            if id(value) not in seen:
                seen.add(id(value))
                yield value
        elif isinstance(value, (list, tuple, dict)):
            yield from slab_tensors(value, seen)


def _host_bookkeeping(obj) -> dict:
    """The attributes of ``obj`` that hold plain Python lists/dicts with no tensor in them."""
    out = {}
    for name, value in vars(obj).items():
        if isinstance(value, (list, dict)) and next(slab_tensors(value), None) is None:
            out[name] = copy.deepcopy(value)
    return out


@contextmanager
def preserved(slab):
    """Run steps for their side effects only (warm-up, compiling, capture): the slab's
    tensors and host bookkeeping are copied on entry and put back on exit."""
    saved = [(t, t.clone()) for t in slab_tensors(slab)]
    host = _host_bookkeeping(slab)
    try:
        yield
    finally:
        for live, kept in saved:
            live.copy_(kept)
        for name, value in host.items():
            setattr(slab, name, value)


class DecodeGraphs:
    """Captured decode steps by bucket; ``__call__(tokens) -> logits [n, vocab]``."""

    def __init__(self, step: Callable[[torch.Tensor], torch.Tensor], slab,
                 buckets: tuple[int, ...] = DEFAULT_BUCKETS, device: torch.device | str = "cuda"):
        device = torch.device(device)
        if device.type != "cuda" or not torch.cuda.is_available():
            raise RuntimeError("CUDA graphs need a CUDA device")
        if not buckets or any(b < 1 for b in buckets):
            raise ValueError(f"DecodeGraphs: buckets must be positive batch sizes, got {buckets}")
        self.buckets = tuple(sorted(set(buckets)))
        self.device = device
        self._inputs: dict[int, torch.Tensor] = {}
        self._outputs: dict[int, torch.Tensor] = {}
        self._graphs: dict[int, torch.cuda.CUDAGraph] = {}
        pool = torch.cuda.graph_pool_handle()
        with preserved(slab):
            for b in sorted(self.buckets, reverse=True):  # largest first: the pool fits the rest
                tokens = torch.zeros(b, dtype=torch.int64, device=device)
                side = torch.cuda.Stream(device)
                side.wait_stream(torch.cuda.current_stream(device))
                with torch.cuda.stream(side):
                    for _ in range(WARMUP_CALLS):
                        step(tokens)
                torch.cuda.current_stream(device).wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=pool):
                    out = step(tokens)
                self._inputs[b], self._outputs[b], self._graphs[b] = tokens, out, graph
        torch.cuda.synchronize(device)

    def bucket(self, n: int) -> int:
        for b in self.buckets:
            if b >= n:
                return b
        raise ValueError(f"DecodeGraphs: {n} requests exceed the largest bucket {self.buckets[-1]}")

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        n = tokens.shape[0]
        b = self.bucket(n)
        inputs = self._inputs[b]
        inputs[:n].copy_(tokens)
        if n < b:
            inputs[n:].zero_()
        self._graphs[b].replay()
        return self._outputs[b][:n]
