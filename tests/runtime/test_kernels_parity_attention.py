"""Fused vs reference, per op, on random inputs drawn fresh every run (the seed is in
every failure message). Without CUDA the kernels run through the Triton interpreter on
tiny shapes; with CUDA the same checks run at ``mid``/``flash`` shapes in bf16 and fp32.

Tolerances (max |fused - reference|; "rel" is relative to max |ref|):
  attention fp32 2e-5 rel ; bf16 2e-2 rel (P is rounded to bf16 for the PV product)
  inv_rope  fp32 exact-ish 1e-6 ; bf16 1 ulp (2^-7 rel): attention's output un-rotated
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from runtime.kernels.attention_tiles import AttentionTile
from runtime.kernels.reference import REFERENCE_OPS
from tests.runtime.parity import CUDA, DEVICE, NUM, TINY, close, randn


def check_attention(fused, gen, t, n_heads, hd, window, k, n_comp, dtype, with_topk=True, splits=None,
                    merge_d=0, value_d=0, tile=None, op=None):
    """The fused attention against the reference on random caches; ``tile`` forces a
    tiling (else ``splits`` / ``merge_d`` / ``value_d`` force one of 16-key tiles), ``op``
    an instance to call (its state, e.g. the merge tail's counters, is then the caller's
    to inspect). Returns the fused output."""
    p_max = 3 * window
    positions = torch.randint(0, p_max, (t,), generator=gen)
    positions[0] = 0  # window edge: only itself
    if t > 2:
        positions[1] = window - 1  # the first full window
    floor = torch.zeros(t, dtype=torch.int64)
    if t > 3:
        floor[2] = positions[2] // 2 + 1 if positions[2] > 1 else 0  # a replay floor inside the window
    positions[2:3] = torch.maximum(positions[2:3], floor[2:3])
    q = randn(gen, t, n_heads, hd, dtype=dtype)
    swa = randn(gen, p_max, hd, dtype=dtype)
    comp = topk = None
    if with_topk:
        comp = randn(gen, n_comp, hd, dtype=dtype)
        topk = torch.randint(-1, n_comp, (t, k), generator=gen).sort(1).values.to(DEVICE)
        topk[0] = -1  # nothing selected
    sink = randn(gen, n_heads)
    pos, flo = positions.to(DEVICE), floor.to(DEVICE)
    # A forced split count in 16-key tiles, so that small key lists split too.
    if tile is None and splits is not None:
        tile = AttentionTile(16, 16, splits=splits, merge_d=merge_d, value_d=value_d)
    if op is None:
        op = fused.attention if tile is None else type(fused.attention)(tile=tile)
    a = op(q, pos, flo, swa, window, comp, topk, sink, NUM)
    b = REFERENCE_OPS["attention"](q, pos, flo, swa, window, comp, topk, sink, NUM)
    tol = 2e-5 if dtype == torch.float32 else 2e-2
    close(a, b, tol, rel=True, what="attention", seed=gen.initial_seed())
    return a


@pytest.mark.parametrize("t,splits,with_topk,merge_d,value_d", [
    (1, None, True, 0, 0), (5, None, True, 0, 0), (4, 4, True, 0, 0), (3, None, False, 0, 0),
    (4, 4, True, 16, 0), (2, 3, True, 32, 0), (3, 1, True, 0, 16), (4, 4, True, 32, 32), (2, 2, False, 0, 16)])
def test_attention_parity_small(fused, gen, t, splits, with_topk, merge_d, value_d):
    """``merge_d``: the merge in head-dim column blocks; ``value_d``: each partial program
    accumulating a block of the value columns (TINY's head dim is 64)."""
    check_attention(fused, gen, t, TINY.num_attention_heads, TINY.head_dim, 16, 8, 10, torch.float32,
                    with_topk=with_topk, splits=splits, merge_d=merge_d, value_d=value_d)


@pytest.mark.parametrize("t,splits,with_topk", [(1, None, True), (5, None, True), (4, 4, True), (2, 3, True),
                                                (3, None, False)])
def test_attention_ids_ahead_parity_small(fused, t, splits, with_topk):
    """``AttentionTile.ids_ahead`` (each tile's ids loaded one iteration ahead): the
    reference's values, and bit for bit the plain tile's (the same ids address the same
    keys), with splits (a split's first tile starts past the window or inside it) and
    without top-k."""
    outs = [check_attention(fused, torch.Generator().manual_seed(11), t, TINY.num_attention_heads, TINY.head_dim,
                            16, 8, 10, torch.float32, with_topk=with_topk,
                            tile=AttentionTile(16, 16, splits=splits or 1, ids_ahead=ahead))
            for ahead in (False, True)]
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("window", [16, 24])
@pytest.mark.parametrize("t,splits,with_topk,ahead,value_d", [
    (1, None, True, False, 0), (5, None, True, True, 0), (4, 4, True, False, 0), (4, 4, True, True, 0),
    (2, 3, True, False, 32), (3, None, False, False, 0)])
def test_attention_split_sources_parity_small(fused, t, splits, with_topk, ahead, value_d, window):
    """``AttentionTile.split_sources`` (a split's window slots in one loop, its top-k slots in
    a second): the reference's values at a window that is a whole number of 16-key tiles and
    at one that is not (the single loop's tile there holds keys of both sources), splits
    starting inside the window or past it, ids ahead, a value split and no top-k; where the
    window is whole tiles, bit for bit the single loop's output (the same tiles)."""
    outs = [check_attention(fused, torch.Generator().manual_seed(13), t, TINY.num_attention_heads, TINY.head_dim,
                            window, 8, 10, torch.float32, with_topk=with_topk,
                            tile=AttentionTile(16, 16, splits=splits or 1, ids_ahead=ahead, value_d=value_d,
                                               split_sources=on))
            for on in (False, True)]
    if window % 16 == 0:
        assert torch.equal(outs[0], outs[1])


def check_merge_tail(fused, seed, t, n_heads, hd, window, k, n_comp, dtype, tile, with_topk=True):
    """``tile`` with ``merge_tail`` against the same tile merged by the second launch: both
    within the reference's tolerance (check_attention), within float32 rounding of each
    other (the tail sums the splits in order, the merge kernel as a tree), the tail's
    output the same bit for bit when called again (whichever program finishes last), and
    every ticket counter back at zero after each call (the next call's tickets start at 0)."""

    def run(merge_tail, op):
        return check_attention(fused, torch.Generator().manual_seed(seed), t, n_heads, hd, window, k, n_comp, dtype,
                               with_topk=with_topk, op=op or type(fused.attention)(tile=replace(tile, merge_tail=merge_tail)))

    merged = run(False, None)
    tail_op = type(fused.attention)(tile=replace(tile, merge_tail=True))
    tails = [run(True, tail_op) for _ in range(2)]
    counters = tail_op.tickets.get(torch.device(DEVICE), 1)
    assert int(counters.abs().sum()) == 0, f"ticket counters left at {counters.nonzero().flatten().tolist()}"
    assert torch.equal(tails[0], tails[1]), "the merge tail's output moved between two identical calls"
    scale = float(merged.abs().max())
    diff = float((tails[0] - merged).abs().max())
    assert diff <= 1e-5 * scale, f"merge tail vs merge launch: max |diff| {diff:.3g} (output scale {scale:.3g})"
    return tails[0]


@pytest.mark.parametrize("t,n_heads,splits,with_topk,value_d", [
    (1, 4, 2, True, 0), (4, 4, 3, True, 0), (5, 32, 4, True, 0), (3, 4, 4, False, 0), (4, 4, 3, True, 32),
    (2, 20, 5, True, 0)])
def test_attention_merge_tail_parity_small(fused, t, n_heads, splits, with_topk, value_d):
    """``AttentionTile.merge_tail`` (the last partial program of each query's head block
    merges, no merge launch) on the interpreter: splits that are and are not a power of two,
    two head blocks (32 heads, 20 with a partial block), a value split (the ticket counts
    every split's every column block) and no top-k."""
    check_merge_tail(fused, 17, t, n_heads, TINY.head_dim, 16, 8, 10, torch.float32,
                     AttentionTile(16, 16, splits=splits, value_d=value_d), with_topk=with_topk)


def test_attention_merge_tail_needs_no_merge_columns():
    with pytest.raises(ValueError, match="merge_tail"):
        AttentionTile(16, 16, splits=4, merge_d=64, merge_tail=True)


def test_attention_float32_runs_the_rows_float32_keys_per_tile(fused):
    """float32 operands run ``AttentionTile.float32_block_n`` keys per tile (the wide rows:
    their 64-key float32 tiles do not fit sm_90's shared memory): bit for bit the output of
    the same tiling on that many keys, and not the output on ``block_n`` keys (another
    online-softmax order, so other rounding)."""
    def run(tile):
        return check_attention(fused, torch.Generator().manual_seed(5), 9, TINY.num_attention_heads, TINY.head_dim,
                               32, 64, 80, torch.float32, tile=tile)

    narrowed = run(AttentionTile(16, 32, splits=2, float32_block_n=16))
    assert torch.equal(narrowed, run(AttentionTile(16, 16, splits=2)))
    assert not torch.equal(narrowed, run(AttentionTile(16, 32, splits=2)))


@pytest.mark.parametrize("t", [9, 66])
def test_attention_parity_wide_heads(fused, gen, t):
    """64 heads at 9-64 queries and at prefill take the tile table's wide rows (all 64 heads
    in one program on 8 warps: runtime/kernels/attention_tiles.py, WIDE_TILES)."""
    from runtime.kernels.attention_tiles import WIDE_TILES, tile_for

    assert tile_for(t, 512, heads=64) is WIDE_TILES[(64 if t <= 64 else 0, 512)]  # rows of head dim 512
    check_attention(fused, gen, t, 64, 512, 16, 8, 10, torch.float32)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("t,n_heads", [(1, 16), (8, 16), (64, 16), (200, 16), (4, 64), (64, 64), (200, 64)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_attention_parity_gpu(fused, gen, t, n_heads, dtype):
    check_attention(fused, gen, t, n_heads, 512, 128, 512, 3000, dtype)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("t,n_heads", [(8, 16), (64, 16), (200, 16), (8, 64), (64, 64), (200, 64)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("flag", ["prefetch_ids", "ids_ahead"])
def test_attention_prefetched_ids_parity_gpu(fused, t, n_heads, dtype, flag):
    """``AttentionTile.prefetch_ids`` (the top-k ids pulled into L1 before the loop) and
    ``ids_ahead`` (each tile's ids loaded one iteration ahead) on the table's own tile for
    the shape, each at 3 stages too: within the reference's tolerance, and bit for bit the
    output of the same tile without it (neither moves a value). The 3-stage twin of a
    2-stage row runs one key loop (no ``split_sources``), and programs of 64 heads (the wide
    rows) whose key tile takes 64 KB (float32 on 32 keys, bf16 on 64) stay at the row's own
    stages: there the 3-stage tile with the ids ahead needs more shared memory than sm_90's
    232,448 bytes (Triton 3.6, compiled metadata: float32 on 32 keys 270,592, bf16 on 64
    keys 262,144)."""

    from runtime.kernels.attention_tiles import tile_for

    row = tile_for(t, 512, heads=n_heads)
    key_tile_bytes = row.keys_per_tile(dtype == torch.float32) * 512 * torch.finfo(dtype).bits // 8
    wide_and_large = row.heads_per_program(n_heads) >= 64 and key_tile_bytes >= 64 * 1024
    for stages in sorted({row.num_stages} if wide_and_large else {row.num_stages, 3}):
        tile = replace(row, num_stages=stages, prefetch_ids=False, ids_ahead=False,
                       split_sources=row.split_sources and stages == row.num_stages)
        outs = [check_attention(fused, torch.Generator().manual_seed(7), t, n_heads, 512, 128, 512, 3000, dtype,
                                tile=replace(tile, **{flag: on})) for on in (False, True)]
        assert torch.equal(outs[0], outs[1]), f"{flag} moved the output: {tile.label()} T={t} H={n_heads}"


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("t,n_heads", [(1, 16), (8, 16), (64, 16), (8, 64), (64, 64)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_attention_merge_tail_parity_gpu(fused, t, n_heads, dtype):
    """The merge tail on the table's own tile for the shape (without merge columns: the tail
    has no merge programs), compiled: see ``check_merge_tail``."""

    from runtime.kernels.attention_tiles import tile_for

    row = tile_for(t, 512, heads=n_heads)
    check_merge_tail(fused, 7, t, n_heads, 512, 128, 512, 3000, dtype, replace(row, merge_d=0))


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("t,n_heads", [(1, 16), (8, 16), (64, 16), (1, 64), (8, 64), (64, 64)])
@pytest.mark.parametrize("merge_warps", [1, 2, 4, 8])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_attention_merge_warps_parity_gpu(fused, t, n_heads, merge_warps, dtype):
    """``AttentionTile.merge_warps`` on the table's own tile for the shape: within the
    reference's tolerance, and within float32 rounding of the row's own merge (another warp
    count lays the splits' sum out differently across threads)."""

    from runtime.kernels.attention_tiles import tile_for

    row = tile_for(t, 512, heads=n_heads)
    outs = [check_attention(fused, torch.Generator().manual_seed(11), t, n_heads, 512, 128, 512, 3000, dtype,
                            tile=tile) for tile in (row, replace(row, merge_warps=merge_warps))]
    scale = float(outs[0].abs().max())
    diff = float((outs[1] - outs[0]).abs().max())
    assert diff <= 1e-5 * scale, (f"merge on {merge_warps} warps vs the row's {row.merge_warps}: max |diff| {diff:.3g} "
                                  f"(output scale {scale:.3g})")


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("t,n_heads", [(1, 16), (8, 16), (64, 16), (200, 16), (8, 64), (64, 64), (200, 64)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_attention_split_sources_parity_gpu(fused, t, n_heads, dtype):
    """``AttentionTile.split_sources`` compiled on the table's own tile for the shape (window
    128: whole tiles): within the reference's tolerance, and bit for bit the single loop's
    output."""

    from runtime.kernels.attention_tiles import tile_for

    tile = tile_for(t, 512, heads=n_heads)
    outs = [check_attention(fused, torch.Generator().manual_seed(7), t, n_heads, 512, 128, 512, 3000, dtype,
                            tile=replace(tile, split_sources=on)) for on in (False, True)]
    assert torch.equal(outs[0], outs[1]), f"split_sources moved the output: {tile.label()} T={t} H={n_heads}"


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("splits,merge_d,value_d", [(16, 64, 0), (16, 128, 0), (16, 256, 0), (16, 0, 256),
                                                    (4, 128, 128), (1, 0, 256)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_attention_column_blocks_parity_gpu(fused, gen, splits, merge_d, value_d, dtype):
    """The merge in head-dim column blocks and the value split, compiled, at decode shapes."""
    check_attention(fused, gen, 8, 16, 512, 128, 512, 3000, dtype, splits=splits, merge_d=merge_d, value_d=value_d)




# ---------------------------------------------------------------------------- inverse rope
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_inv_rope_parity(fused, gen, dtype):
    rows, n_heads, hd, half = (300, 16, 512, 32) if CUDA else (5, 4, 128, 8)
    out = randn(gen, rows, n_heads, hd)
    angles = randn(gen, rows, half, scale=3.0)
    a = fused.inv_rope(out, angles.cos(), angles.sin(), dtype)
    b = REFERENCE_OPS["inv_rope"](out, angles.cos(), angles.sin(), dtype)
    assert a.dtype == b.dtype == dtype
    close(a, b, 1e-6 if dtype == torch.float32 else 2.0**-7, rel=True, what="inv_rope", seed=gen.initial_seed())
