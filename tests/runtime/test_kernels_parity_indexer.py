"""Fused vs reference, per op, on random inputs drawn fresh every run (the seed is in
every failure message). Without CUDA the kernels run through the Triton interpreter on
tiny shapes; with CUDA the same checks run at ``mid``/``flash`` shapes in bf16 and fp32.

Tolerances (max |fused - reference|; "rel" is relative to max |ref|):
  indexer   fp32 1e-5 rel ; bf16 inputs 1e-5 rel (exact bf16 products, fp32 sums)
  topk      exactly equal ids (same lowest-index tie rule), checked on ReLU-tied scores too
"""

from __future__ import annotations

import pytest
import torch

from runtime.kernels.reference import REFERENCE_OPS
from tests.runtime.parity import CUDA, DEVICE, MID, NUM, TINY, close, ids_agree_tie_robust, randn


def make_index_case(gen, t, n, n_heads, dim, dtype, ratio=2):
    """Queries at ragged positions (some see nothing yet, some see everything)."""
    q = randn(gen, t, n_heads, dim, dtype=dtype)
    head_w = randn(gen, t, n_heads, scale=n_heads**-0.5)
    keys = randn(gen, n, dim, dtype=dtype)
    positions = torch.randint(0, ratio * n + 2, (t,), generator=gen)
    positions[0] = 0  # sees no complete group yet
    if t > 1:
        positions[1] = ratio * n - 1  # sees every key
    counts = ((positions + 1) // ratio).clamp_max(n).to(DEVICE)
    return q, head_w, keys, counts


def check_indexer(fused, gen, t, n, n_heads, dim, dtype, k):
    q, head_w, keys, counts = make_index_case(gen, t, n, n_heads, dim, dtype)
    a = fused.indexer(q, head_w, keys, counts, NUM)
    b = REFERENCE_OPS["indexer"](q, head_w, keys, counts, NUM)
    seed = gen.initial_seed()
    assert torch.equal(torch.isinf(a).cpu(), torch.isinf(b).cpu()), f"indexer masks differ (seed {seed})"
    fin = torch.isfinite(b)
    close(a[fin], b[fin], 1e-5, rel=True, what="indexer scores", seed=seed)
    # top-k on the reference scores: same multiset of chosen scores, ids up to ties.
    ta = fused.topk(b, k)
    tb = REFERENCE_OPS["topk"](b, k)
    vals_a = torch.where(ta >= 0, b.gather(1, ta.clamp_min(0)), torch.full_like(b[:, :1], float("-inf")).expand_as(ta))
    vals_b = torch.where(tb >= 0, b.gather(1, tb.clamp_min(0)), torch.full_like(b[:, :1], float("-inf")).expand_as(tb))
    assert torch.equal(vals_a.sort(1).values.cpu(), vals_b.sort(1).values.cpu()), f"topk scores differ (seed {seed})"
    assert bool((ta[:, 1:] >= ta[:, :-1]).logical_or(ta[:, 1:] < 0).all()), "topk ids not ascending"
    ids_agree_tie_robust(ta, tb, b, 0.0, "topk ids", seed)
    assert torch.equal(ta.cpu(), tb.cpu()), f"topk ids differ (seed {seed})"


@pytest.mark.parametrize("t,n", [(1, 37), (2, 37), (5, 130), (18, 64)])
def test_indexer_parity_small(fused, gen, t, n):
    check_indexer(fused, gen, t, n, TINY.index_n_heads, TINY.index_head_dim, torch.float32, TINY.index_topk)


def test_topk_ties_resolved_within_the_tie(fused, gen):
    """ReLU zeros make many exact ties: the fused select keeps the reference's rule
    (lowest index wins) exactly, not just up to the tie."""
    scores = torch.relu(randn(gen, 6, 50)).round(decimals=1)
    scores[:, 45:] = float("-inf")
    a = fused.topk(scores, 16)
    b = REFERENCE_OPS["topk"](scores, 16)
    ids_agree_tie_robust(a, b, scores, 0.0, "topk ties", gen.initial_seed())
    assert torch.equal(a.cpu(), b.cpu()), f"topk ties resolved differently (seed {gen.initial_seed()})"


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("t,n", [(1, 4096), (8, 65536), (300, 2048), (2, 131072), (8, 8192)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_indexer_parity_gpu(fused, gen, t, n, dtype):
    """(8, 8192): one key tile per program against 128 columns, the policy's 8-warp case."""
    check_indexer(fused, gen, t, n, MID.index_n_heads, MID.index_head_dim, dtype, MID.index_topk)
