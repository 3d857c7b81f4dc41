"""Compressor (across chunk boundaries), indexer (scores, visibility, two-level top-k
with lowest-index ties) and sparse attention with sink, against float64 recomputes."""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch

from runtime.attention import sparse_attention
from runtime.compressor import compress_rows
from runtime.config import V41Config
from runtime.indexer import (
    candidate_mask,
    index_scores,
    mask_invisible,
    top_k_entries,
    visible_counts,
)
from runtime.numerics import ROW_TILE, Numerics

CFG = V41Config.preset("tiny")


def comp_weights(gen, d=256, hd=128):
    return SimpleNamespace(
        wkv=SimpleNamespace(weight=torch.randn(hd, d, generator=gen) / 16),
        wgate=SimpleNamespace(weight=torch.randn(hd, d, generator=gen) / 16),
        norm=SimpleNamespace(weight=torch.rand(hd, generator=gen) + 0.5),
    )


def pooled_ref(x, w, ratio, eps):
    """Float64: per group, per channel softmax over the gate, weighted kv sum, RMSNorm."""
    xd = x.double()
    kv, g = xd @ w.wkv.weight.double().t(), xd @ w.wgate.weight.double().t()
    out = []
    for start in range(0, (x.shape[0] // ratio) * ratio, ratio):
        gs, ks = g[start : start + ratio], kv[start : start + ratio]
        e = torch.exp(gs - gs.max(0).values)
        latent = (ks * e / e.sum(0)).sum(0)
        latent = latent / torch.sqrt(latent.pow(2).mean() + eps) * w.norm.weight.double()
        out.append(latent)
    return torch.stack(out)


def test_compressor_ratio2_across_chunk_boundaries():
    gen = torch.Generator().manual_seed(0)
    w = comp_weights(gen)
    x = torch.randn(21, 256, generator=gen)
    num = Numerics(ROW_TILE)
    one_shot, pos, rest = compress_rows(x, 0, None, w, 2, CFG, num)
    assert pos == 0 and one_shot.shape == (10, 128) and rest[0].shape == (1, 128)
    assert torch.allclose(one_shot.double(), pooled_ref(x, w, 2, CFG.rms_norm_eps), atol=1e-4)
    # Feed the same rows in odd-sized chunks; the partial group carries over.
    buffer, latents, first_positions, start = None, [], [], 0
    for size in (3, 1, 1, 5, 2, 9):
        latent, group_pos, buffer = compress_rows(x[start : start + size], start, buffer, w, 2, CFG, num)
        if latent is not None:
            latents.append(latent)
            first_positions.append(group_pos)
        start += size
    assert first_positions == [0, 2, 4, 10, 12]  # each call's first completed group, by its first token
    assert torch.equal(torch.cat(latents), one_shot)
    assert torch.equal(buffer[0], rest[0]) and torch.equal(buffer[1], rest[1])


def test_compressor_ratio1_is_a_normed_projection():
    gen = torch.Generator().manual_seed(1)
    w = comp_weights(gen)
    x = torch.randn(4, 256, generator=gen)
    latent, pos, rest = compress_rows(x, 7, None, w, 1, CFG, Numerics())
    ref = x.double() @ w.wkv.weight.double().t()
    ref = ref / torch.sqrt(ref.pow(2).mean(-1, keepdim=True) + CFG.rms_norm_eps) * w.norm.weight.double()
    assert pos == 7 and rest is None and torch.allclose(latent.double(), ref, atol=1e-5)


def test_index_scores_and_visibility():
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(3, 2, 32, generator=gen)
    head_w = torch.randn(3, 2, generator=gen)
    keys = torch.randn(9, 32, generator=gen)
    got = index_scores(q, head_w, keys, Numerics(ROW_TILE))
    for t in range(3):
        for j in range(9):
            ref = sum(float(head_w[t, h]) * max(0.0, float(q[t, h].double() @ keys[j].double())) / math.sqrt(32)
                      for h in range(2))
            assert abs(float(got[t, j]) - ref) < 1e-4
    counts = visible_counts(torch.tensor([0, 1, 2, 5]), 2)
    assert counts.tolist() == [0, 1, 1, 3]  # entry j visible iff j < (p + 1) // 2
    masked = mask_invisible(torch.zeros(4, 5), counts)
    assert torch.isinf(masked).tolist() == [[j >= c for j in range(5)] for c in (0, 1, 1, 3)]


def test_top_k_lowest_index_ties_and_dropped_minus_inf():
    inf = float("-inf")
    scores = torch.tensor([
        [1.0, 3.0, 3.0, 0.0, 3.0, 2.0],  # ties at 3: keep ids 1, 2 (lowest) for k=2
        [0.0, 0.0, 0.0, 0.0, inf, inf],  # ReLU ties at 0: the lowest ids win
        [inf, 5.0, inf, inf, inf, inf],  # one visible entry: the rest of the row is empty
    ])
    assert top_k_entries(scores, 2).tolist() == [[1, 2], [0, 1], [1, -1]]
    assert top_k_entries(scores, 8).tolist()[2] == [1] + [-1] * 7


def test_candidate_blocks_pin_the_newest_block():
    inf = float("-inf")
    # 10 entries in blocks of 4: [0-3], [4-7], [8-9]; query sees 9 entries (newest block 2).
    scores = torch.tensor([[9.0, 1.0, 1.0, 1.0, 5.0, 5.0, 5.0, 5.0, 0.0, inf]])
    counts = torch.tensor([9])
    keep = candidate_mask(scores, counts, n_blocks=2, block=4)
    # Block 2 (max 0.0) is pinned although block 1 (max 5) outscores it; block 0 (max 9) wins.
    assert keep.tolist() == [[True] * 4 + [False] * 4 + [True, True]]
    # Unreachable blocks (all -inf) are never kept, even when n_blocks allows them.
    few = candidate_mask(torch.tensor([[1.0, inf, inf, inf, inf, inf]]), torch.tensor([1]), 3, 2)
    assert few.tolist() == [[True, True, False, False, False, False]]


def attention_ref(q, p, floor, swa, window, compressed, topk, sink):
    """Float64: one softmax over the window keys and the chosen entries, sink in the denominator."""
    n_heads, hd = q.shape
    keys = [swa[j] for j in range(max(p - window + 1, floor), p + 1)]
    keys += [compressed[j] for j in topk if j >= 0]
    k = torch.stack(keys).double()
    out = []
    for h in range(n_heads):
        logits = (k @ q[h].double()) / math.sqrt(hd)
        top = max(float(logits.max()), float(sink[h]))
        e = torch.exp(logits - top)
        denom = float(e.sum()) + math.exp(float(sink[h]) - top)
        out.append((e[:, None] * k).sum(0) / denom)
    return torch.stack(out)


def test_sparse_attention_with_sink_against_float64():
    gen = torch.Generator().manual_seed(3)
    window, hd = 8, 32
    swa = torch.randn(20, hd, generator=gen)
    swa[:3] = float("nan")  # below the floor: must never be read
    compressed = torch.randn(6, hd, generator=gen)
    q = torch.randn(4, 2, hd, generator=gen)
    positions = torch.tensor([3, 5, 12, 19])
    topk = torch.tensor([[0, 2, -1], [1, -1, -1], [0, 3, 5], [-1, -1, -1]])
    sink = torch.tensor([0.5, -1.0])
    floor = torch.full((4,), 3)
    for num in (Numerics(), Numerics(ROW_TILE)):
        got = sparse_attention(q, positions, floor, swa, window, compressed, topk, sink, num)
        assert not torch.isnan(got).any()
        for t in range(4):
            ref = attention_ref(q[t], int(positions[t]), 3, swa, window, compressed, topk[t].tolist(), sink)
            assert torch.allclose(got[t].double(), ref, atol=1e-5)


def test_top_k_and_candidate_blocks_match_a_brute_force_sort_on_many_ties():
    gen = torch.Generator().manual_seed(4)
    scores = torch.randint(0, 4, (40, 37), generator=gen).float()  # heavy ties
    scores[torch.rand(40, 37, generator=gen) < 0.3] = float("-inf")
    for k in (1, 5, 37, 50):
        got = top_k_entries(scores, k).tolist()
        for row, picked in zip(scores.tolist(), got, strict=True):
            ranked = sorted((j for j, v in enumerate(row) if v > float("-inf")), key=lambda j: (-row[j], j))
            want = sorted(ranked[:k])
            assert picked == want + [-1] * (k - len(want))
    counts = torch.randint(0, 38, (40,), generator=gen)
    masked = mask_invisible(scores, counts)
    keep = candidate_mask(masked, counts, n_blocks=3, block=4)
    for t in range(40):
        row, c = masked[t].tolist(), int(counts[t])
        blocks = [max(row[b * 4 : b * 4 + 4]) for b in range(10)]
        if c > 0:
            blocks[(c - 1) // 4] = float("inf")
        ranked = sorted((b for b in range(10) if blocks[b] > float("-inf")), key=lambda b: (-blocks[b], b))[:3]
        want = [(j // 4) in ranked for j in range(37)]
        assert keep[t].tolist() == want
