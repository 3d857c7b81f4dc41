"""The per-step parts the static decode step shares between layers (runtime/static) equal
the per-layer formulations they replaced, bit for bit.

Each restructured part against its old form, written out here: the key bias (one select
vs zeros + negation + masked_fill), the visibility mask (built once per ratio vs the
engine's ``mask_invisible`` of ``visible_counts`` per index source), the candidate mask
(a select vs ``masked_fill(~allowed)``), the group write indices and compressed RoPE rows
(once per ratio vs per KV source), grouped_moe's group ends (one search vs
scatter_add + cumsum, and vs ``torch.bincount``). The whole step against the engine stays
in tests/runtime/test_static_decode.py and test_static_model.py.
"""

from __future__ import annotations

import pytest
import torch

from runtime.grouped_moe import group_ends
from runtime.indexer import blocks_to_mask, mask_invisible, visible_counts
from runtime.static.attention import _bias
from runtime.static.compressor import GroupIndex
from runtime.static.indexer import NEG_INF, Visibility

GEN = torch.Generator().manual_seed(7)


def bitwise(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, dtype and signs of zeros (torch.equal alone lets -0.0 == 0.0 pass)."""
    return a.dtype == b.dtype and torch.equal(a, b) and torch.equal(torch.signbit(a), torch.signbit(b))


def test_key_bias_is_zeros_masked_to_minus_infinity():
    ok = torch.rand(5, 37, generator=GEN) > 0.4
    old = torch.zeros(ok.shape, dtype=torch.float32).masked_fill(~ok, NEG_INF)
    assert bitwise(_bias(ok), old)


@pytest.mark.parametrize("ratio", [1, 2])
def test_visibility_equals_the_engines_mask_invisible(ratio):
    pos = torch.tensor([0, 1, 2, 5, 40, 63])
    n = 64 // ratio
    scores = torch.randn(pos.shape[0], n, generator=GEN)
    vis = Visibility.at(pos, ratio, torch.arange(n))
    assert torch.equal(vis.counts, visible_counts(pos, ratio))
    assert bitwise(scores.masked_fill(vis.hidden, NEG_INF), mask_invisible(scores, visible_counts(pos, ratio)))


def test_candidate_mask_select_equals_masked_fill_of_the_negation():
    scores = torch.randn(4, 30, generator=GEN)
    scores[0, 3] = NEG_INF
    blocks = torch.tensor([[0, 2, -1], [1, -1, -1], [-1, -1, -1], [0, 1, 7]])
    allowed = blocks_to_mask(blocks, scores.shape[1], 4)
    assert bitwise(torch.where(allowed, scores, NEG_INF), scores.masked_fill(~allowed, NEG_INF))


@pytest.mark.parametrize("ratio", [1, 2, 4])
def test_group_index_rows_equal_the_per_source_lookup(ratio):
    pos = torch.tensor([0, 1, 2, 3, 6, 7, 31])
    cos, sin = torch.randn(32, 8, generator=GEN), torch.randn(32, 8, generator=GEN)
    g = GroupIndex.at(pos, ratio, cos, sin)
    start = torch.tensor([p - p % ratio for p in pos.tolist()])
    assert bitwise(g.cos, cos[start]) and bitwise(g.sin, sin[start])
    assert g.entry.flatten().tolist() == [p // ratio for p in pos.tolist()]
    if ratio == 1:
        assert g.row is None and g.complete is None
        given = GroupIndex.at(pos, 1, cos, sin, rows_at_pos=(cos[pos], sin[pos]))
        assert bitwise(given.cos, cos[pos]) and bitwise(given.sin, sin[pos])
    else:
        assert g.row.flatten().tolist() == [p % ratio for p in pos.tolist()]
        assert g.complete.flatten().tolist() == [(p + 1) % ratio == 0 for p in pos.tolist()]


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_group_ends_count_the_ids_up_to_each_expert(dtype):
    n_experts = 8
    for m in (1, 7, 48):
        ids = torch.randint(0, n_experts - 2, (m,), generator=GEN).to(dtype)  # the last experts get none
        ids_sorted = torch.sort(ids, stable=True).values
        ends = group_ends(ids_sorted, torch.arange(n_experts))
        counts = torch.zeros(n_experts, dtype=torch.int32)
        counts.scatter_add_(0, ids.to(torch.int64), torch.ones_like(ids, dtype=torch.int32))
        assert ends.dtype == torch.int32
        assert torch.equal(ends, counts.cumsum(0, dtype=torch.int32))  # the old formulation
        assert ends.tolist() == torch.bincount(ids.to(torch.int64), minlength=n_experts).cumsum(0).tolist()
