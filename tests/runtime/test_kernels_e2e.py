"""End to end: the fused engine vs the reference engine on the same weights.

CPU (``tiny`` with the test-only window 16 of docs/model.md §7a, kernels through the Triton
interpreter): one ragged batch of a fixed prompt set (lengths 9 / 23 / 40: inside the
window, past it, past the indexer's top-k), then 3 teacher-forced batched decode steps
(both engines are fed the reference's greedy token). The weights come from a fixed seed
(1234) so CI is deterministic; ``V41VAL_E2E_SEED=<int>`` or ``=random`` runs others (the
seed is printed first). Why fixed: the check below is statistical, and the model's
quantisers make one weight draw in several a cascade draw. Measured on 8 draws (CPU,
torch 2.13): 7 had a median row difference of 1.2-1.4e-6 and every row within 1e-3; one
(seed 2507813520) had a median of 5.0e-3 (worst row 4.2e-2) with 12/12 greedy tokens still
agreeing, and fusing the gate alone reproduced it (median 2.8e-3 on the 40-token prompt):
an FP8/NVFP4 step flip on an early compressed entry that every later row reads, not a
kernel error. Kernel errors show up per op in test_kernels_parity.py.

Tolerance. Per op the kernels agree to ~1e-6 (test_kernels_parity.py), but the model's
own quantisers (FP8 window KV, NVFP4 entries, MXFP4 index keys), the indexer top-k and
the MoE routing are discontinuous, and they chain: a last-bit difference moves an FP8
value one step (~1e-4 on later logits), which can then swap a near-tied expert for a
later token (measured: a single fused op alone gives <= 2e-4; all ops fused gave a 0.96
logit difference on some rows of one prompt for one weight seed, 2e-3 for another).
So the check is statistical: the MEDIAN row differs by <= 1e-3 x max(1, max |logit|)
(most rows see no flip), the teacher-forced greedy tokens agree on >= 75 % of the
positions, and every disagreeing token sits on a row that is either a tie (reference
top-2 margin within twice the row's difference) or a flipped row (> 1e-3). The agreement
rate, the row statistics and the worst row are printed and recorded for the report.

GPU (``mid`` in bf16, H200): the same with prompts of 100 / 700 / 1500 tokens, 8 steps;
median row within 5e-2 x max |logit| (bf16).
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


def compare_engines(weights, prompts, steps: int, rel_tol: float, device: str) -> dict:
    ref = V41Model(weights, RuntimeOptions(kernels="reference"))
    fused = V41Model(weights, RuntimeOptions(kernels="fused"))
    assert set(fused.ops.selected.values()) == {"fused"}, fused.ops.describe()
    states = {m: [m.new_state() for _ in prompts] for m in (ref, fused)}
    rels, worst, agree, total, unexplained = [], 0.0, 0, 0, []
    feeds = [(p, "all") for p in prompts]
    for step in range(steps + 1):
        outs = {m: m.forward([SeqChunk(s, t.to(device), how) for s, (t, how) in zip(states[m], feeds, strict=True)])
                for m in (ref, fused)}
        nxt = []
        for i, (a, b) in enumerate(zip(outs[ref], outs[fused], strict=True)):
            la, lb = a.logits.float().cpu(), b.logits.float().cpu()
            scale = la.abs().amax(dim=-1).clamp_min(1.0)
            rel = (la - lb).abs().amax(dim=-1) / scale  # per row
            rels.append(rel)
            worst = max(worst, float(rel.max()))
            top2 = la[-1].topk(2).values
            total += 1
            if int(la[-1].argmax()) == int(lb[-1].argmax()):
                agree += 1
            else:
                margin = float(top2[0] - top2[1])
                tie = margin <= 2 * float((la[-1] - lb[-1]).abs().max())
                if not (tie or float(rel[-1]) > rel_tol):  # neither a tie nor a flipped row
                    unexplained.append((step, i, margin))
            nxt.append(la[-1].argmax().reshape(1))  # teacher forcing: both follow the reference
        feeds = [(t, "last") for t in nxt]
    rel_all = torch.cat(rels)
    return {"agreement": agree / total, "agree": agree, "total": total, "rows": rel_all.numel(),
            "median_rel_diff": float(rel_all.median()), "rows_within_tol": float((rel_all <= rel_tol).float().mean()),
            "worst_rel_diff": worst, "unexplained": unexplained}


def weight_seed() -> int:
    """1234, or V41VAL_E2E_SEED (an int, or "random" for a fresh draw)."""
    value = os.environ.get("V41VAL_E2E_SEED", "1234")
    return int.from_bytes(os.urandom(4), "little") if value == "random" else int(value)


def check_engines(label: str, config: V41Config, lengths: tuple[int, ...], steps: int, tol: float,
                  device: str, record_property) -> None:
    """Fused vs reference on ``config`` with weights from ``weight_seed()``; the result is
    printed and recorded for the report whatever the verdict, then checked."""
    seed = weight_seed()
    print(f"{label} fused vs reference: weights seed {seed}")
    weights = V41Weights.random(config, seed, device=device, draw_on_device=device != "cpu")
    result = compare_engines(weights, prompt_set(config.vocab_size, lengths), steps=steps, rel_tol=tol,
                             device=device)
    result["tol"] = tol
    record_property("fused_vs_reference", result)
    print(f"{label} fused vs reference (weights seed {seed}): {result}")
    assert result["median_rel_diff"] <= result["tol"], result
    assert result["agreement"] >= 0.75, result
    assert not result["unexplained"], result


@pytest.mark.slow
def test_fused_engine_matches_reference_tiny(monkeypatch, record_property):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    check_engines("tiny", V41Config.preset("tiny").replace(sliding_window=16), (9, 23, 40), steps=3,
                  tol=1e-3, device="cpu", record_property=record_property)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_fused_engine_matches_reference_mid(record_property):
    check_engines("mid", V41Config.preset("mid"), (100, 700, 1500), steps=8, tol=5e-2, device="cuda",
                  record_property=record_property)
