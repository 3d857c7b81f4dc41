"""End to end: the fused and the reference engine, each against a higher-precision oracle.

Why an oracle. Comparing fused with reference at the same low precision measures their
rounding noise, not a kernel error: at ``mid`` in bf16 on the H200 the *reference* path
alone differed from a float32 oracle by a median 12 % of a row's max logit (top-1 68 %),
the fused path by 12.2 % (68 %), so a fused-vs-reference bound failed with no kernel at
fault. So each path is compared with the oracle (the reference kernels on the same
weights at a higher precision), and the fused path's error is bounded by the reference
path's: ``median_fused <= max(RATIO x median_reference, FLOOR)`` and its teacher-forced
top-1 agreement with the oracle at least the reference's minus ``SLACK``.

CPU (``tiny`` with the test-only window 16 of docs/model.md §7a, fused kernels through the
Triton interpreter, which cannot compute in bf16: docs/pitfalls.md): both paths in
float32, the oracle in float64. One ragged batch of a fixed prompt set (lengths 9 / 23 /
40: inside the window, past it, past the indexer's top-k), then 3 teacher-forced batched
decode steps (all three engines are fed the oracle's greedy token). Weights from seed
1234; ``V41VAL_E2E_SEED=<int>`` or ``=random`` runs others (the seed is printed). Measured
on seed 1234 (CPU, torch 2.13): both float32 paths within a median 1.3e-6 of the float64
oracle (reference 1.28e-6, fused 1.32e-6), worst row 1.4e-2 for both (one of the model's
FP8/NVFP4 quantisers rounding a value to the next step at float32 and not at float64, a
step that later rows read), top-1 agreement 12/12; so FLOOR = 1e-3 decides on the CPU.
Kernel errors per op are in test_kernels_parity_*.py.

GPU (``mid``, H200): both paths in bf16, the oracle in float32 with TF32 off; prompts of
100 / 700 / 1500 tokens, 8 steps; there the ratio decides.
"""

from __future__ import annotations

import os

import pytest
import torch

from runtime.config import V41Config
from runtime.model import SeqChunk, V41Model
from runtime.options import RuntimeOptions
from runtime.weights import V41Weights

CUDA = torch.cuda.is_available()


def prompt_set(vocab: int, lengths: tuple[int, ...]) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(1234)  # the fixed prompt set
    return [torch.randint(0, vocab, (n,), generator=gen) for n in lengths]


RATIO = 1.25  # the fused path's median error may exceed the reference path's by 25 %
SLACK = 0.10  # top-1 agreement with the oracle may be 10 points below the reference's


def _rows(logits: torch.Tensor, oracle: torch.Tensor) -> torch.Tensor:
    """Per row: max |logit - oracle| / max(1, max |oracle|)."""
    scale = oracle.abs().amax(dim=-1).clamp_min(1.0)
    return (logits - oracle).abs().amax(dim=-1) / scale


def compare_with_oracle(config: V41Config, seed: int, prompts: list[torch.Tensor], steps: int,
                        dtype: torch.dtype, oracle_dtype: torch.dtype, device: str) -> dict:
    """Reference and fused engines at ``dtype`` and the reference at ``oracle_dtype``, on the
    same weights (one draw, cast), teacher-forced on the oracle's greedy tokens."""
    draw = device != "cpu"
    low = V41Weights.random(config, seed, dtype=dtype, device=device, draw_on_device=draw)
    high = V41Weights.random(config, seed, dtype=oracle_dtype, device=device, draw_on_device=draw)
    models = {"oracle": V41Model(high, RuntimeOptions(kernels="reference")),
              "reference": V41Model(low, RuntimeOptions(kernels="reference")),
              "fused": V41Model(low, RuntimeOptions(kernels="fused"))}
    assert set(models["fused"].ops.selected.values()) == {"fused"}, models["fused"].ops.describe()
    states = {k: [m.new_state() for _ in prompts] for k, m in models.items()}
    rows = {"reference": [], "fused": []}
    agree = {"reference": 0, "fused": 0}
    total, feeds = 0, [(p, "all") for p in prompts]
    for _ in range(steps + 1):
        outs = {k: m.forward([SeqChunk(s, t.to(device), how)
                              for s, (t, how) in zip(states[k], feeds, strict=True)])
                for k, m in models.items()}
        nxt = []
        for i, oracle_out in enumerate(outs["oracle"]):
            oracle = oracle_out.logits.double().cpu()
            total += 1
            for path in rows:
                logits = outs[path][i].logits.double().cpu()
                rows[path].append(_rows(logits, oracle))
                agree[path] += int(int(logits[-1].argmax()) == int(oracle[-1].argmax()))
            nxt.append(oracle[-1].argmax().reshape(1))  # teacher forcing on the oracle
        feeds = [(t, "last") for t in nxt]
    out = {"positions": total}
    for path, parts in rows.items():
        rel = torch.cat(parts)
        out[path] = {"median_rel_diff": float(rel.median()), "worst_rel_diff": float(rel.max()),
                     "agreement": agree[path] / total}
    return out


def weight_seed() -> int:
    """1234, or V41VAL_E2E_SEED (an int, or "random" for a fresh draw)."""
    value = os.environ.get("V41VAL_E2E_SEED", "1234")
    return int.from_bytes(os.urandom(4), "little") if value == "random" else int(value)


def check_engines(label: str, config: V41Config, lengths: tuple[int, ...], steps: int, floor: float,
                  dtype: torch.dtype, oracle_dtype: torch.dtype, device: str, record_property) -> None:
    """Both paths against the oracle with weights from ``weight_seed()``; the result is
    printed and recorded for the report whatever the verdict, then checked."""
    seed = weight_seed()
    print(f"{label} fused and reference vs a {oracle_dtype} oracle: weights seed {seed}")
    result = compare_with_oracle(config, seed, prompt_set(config.vocab_size, lengths), steps,
                                 dtype, oracle_dtype, device)
    ref, fused = result["reference"], result["fused"]
    result["bound"] = max(RATIO * ref["median_rel_diff"], floor)
    record_property("fused_vs_oracle", result)
    print(f"{label} (weights seed {seed}): {result}")
    assert fused["median_rel_diff"] <= result["bound"], result
    assert fused["agreement"] >= ref["agreement"] - SLACK, result


@pytest.mark.slow
def test_fused_engine_matches_reference_tiny(monkeypatch, record_property):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    check_engines("tiny", V41Config.preset("tiny").replace(sliding_window=16), (9, 23, 40), steps=3,
                  floor=1e-3, dtype=torch.float32, oracle_dtype=torch.float64, device="cpu",
                  record_property=record_property)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_fused_engine_matches_reference_mid(record_property):
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # the oracle's float32 is float32
    try:
        check_engines("mid", V41Config.preset("mid"), (100, 700, 1500), steps=8, floor=1e-2,
                      dtype=torch.bfloat16, oracle_dtype=torch.float32, device="cuda",
                      record_property=record_property)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
