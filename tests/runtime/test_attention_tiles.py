"""The fused attention's tile table (runtime/kernels/attention_tiles.py) and its split plan
(runtime/kernels/attention.py): every bucket has a row, rows are valid Triton tilings,
and a split plan covers the key list with whole tiles and launches no empty split."""

from __future__ import annotations

from dataclasses import replace

import pytest

from runtime.kernels.attention_tiles import (
    HD_BUCKETS,
    PACKED_TILES,
    PACKED_WIDE_TILES,
    PREFILL,
    T_BUCKETS,
    TILES,
    WIDE_HEADS,
    WIDE_TILES,
    AttentionTile,
    t_bucket,
    tile_for,
)


def test_every_bucket_has_a_row():
    assert set(TILES) == {(t, hd) for t in (*T_BUCKETS, PREFILL) for hd in HD_BUCKETS}
    assert [t_bucket(t) for t in (1, 2, 8, 9, 64, 65, 4096)] == [1, 8, 8, 64, 64, PREFILL, PREFILL]
    assert tile_for(1, 512) is TILES[(1, 512)] and tile_for(300, 64) is TILES[(PREFILL, 128)]


def test_packed_caches_take_their_own_rows_where_there_are_some():
    assert set(PACKED_TILES) == {(t, 512) for t in (*T_BUCKETS, PREFILL)}
    assert tile_for(64, 512, packed=True) is PACKED_TILES[(64, 512)] is not TILES[(64, 512)]
    assert tile_for(300, 512, packed=True) is PACKED_TILES[(PREFILL, 512)]
    assert tile_for(8, 128, packed=True) is TILES[(8, 128)]  # no packed row: the table's
    custom = {key: AttentionTile(16, 16) for key in TILES}
    assert tile_for(64, 512, custom, packed=True) is custom[(64, 512)]  # a given table wins


def test_packed_caches_of_64_heads_take_the_packed_wide_rows_where_there_are_some():
    """Packed caches at WIDE_HEADS heads or more: PACKED_WIDE_TILES' row of the bucket (8 and
    64 queries), PACKED_TILES' elsewhere; fewer heads and a given table never take it. The
    wide rows differ from the shared ones (else they would not be rows of their own) and
    run the same packed switches."""
    assert set(PACKED_WIDE_TILES) == {(8, 512), (64, 512)}
    for key, wide in PACKED_WIDE_TILES.items():
        shared = PACKED_TILES[key]
        assert wide != shared
        assert (wide.group_decode, wide.decode_once, wide.split_sources, wide.ids_ahead) == (True,) * 4
    assert tile_for(8, 512, packed=True, heads=64) is PACKED_WIDE_TILES[(8, 512)]
    assert tile_for(2, 512, packed=True, heads=128) is PACKED_WIDE_TILES[(8, 512)]
    assert tile_for(64, 512, packed=True, heads=64) is PACKED_WIDE_TILES[(64, 512)]
    assert tile_for(8, 512, packed=True, heads=63) is PACKED_TILES[(8, 512)]
    assert tile_for(64, 512, packed=True, heads=16) is PACKED_TILES[(64, 512)]
    assert tile_for(1, 512, packed=True, heads=64) is PACKED_TILES[(1, 512)]
    assert tile_for(8, 128, packed=True, heads=64) is TILES[(8, 128)]  # no packed row at head dim 128
    custom = {key: AttentionTile(16, 16) for key in TILES}
    assert tile_for(8, 512, custom, packed=True, heads=64) is custom[(8, 512)]


def test_calls_of_64_heads_take_the_wide_rows_where_there_are_some():
    """At least WIDE_HEADS heads on unpacked caches: the wide row of the bucket where there is
    one (1 query, 2-8 queries, 64 queries, prefill), the shared row elsewhere; fewer heads, packed
    caches and a given table never take it. The 64-query and prefill rows hold all 64 heads
    in one program on 8 warps (wgmma's 64 rows); the 8-query row is the shared row without
    the merge's column blocks, the 1-query row the shared row with its merge on one warp."""
    assert WIDE_HEADS == 64 and set(WIDE_TILES) == {(1, 512), (8, 512), (64, 512), (PREFILL, 512)}
    assert all(WIDE_TILES[key].heads_per_program(64) == 64 and WIDE_TILES[key].num_warps == 8
               for key in ((64, 512), (PREFILL, 512)))
    assert WIDE_TILES[(8, 512)] == replace(TILES[(8, 512)], merge_d=0)
    assert WIDE_TILES[(1, 512)] == replace(TILES[(1, 512)], merge_warps=1)
    assert tile_for(1, 512, heads=64) is WIDE_TILES[(1, 512)] and tile_for(1, 512, heads=63) is TILES[(1, 512)]
    assert tile_for(64, 512, heads=64) is WIDE_TILES[(64, 512)] and tile_for(9, 512, heads=128) is WIDE_TILES[(64, 512)]
    assert tile_for(512, 512, heads=64) is WIDE_TILES[(PREFILL, 512)] and tile_for(2, 512, heads=64) is WIDE_TILES[(8, 512)]
    assert tile_for(1, 512, packed=True, heads=64) is PACKED_TILES[(1, 512)] and tile_for(8, 512, heads=16) is TILES[(8, 512)]
    assert tile_for(300, 128, heads=64) is TILES[(PREFILL, 128)]
    assert tile_for(512, 512, heads=16) is TILES[(PREFILL, 512)] and tile_for(512, 512, heads=63) is TILES[(PREFILL, 512)]
    assert tile_for(512, 512, packed=True, heads=64) is PACKED_TILES[(PREFILL, 512)]
    custom = {key: AttentionTile(16, 16) for key in TILES}
    assert tile_for(512, 512, custom, heads=64) is custom[(PREFILL, 512)]
    # one program per SM: 64 queries x 2 splits = 128 programs, fewer queries split more
    assert [WIDE_TILES[(64, 512)].splits_for(t, 64) for t in (9, 16, 32, 64)] == [16, 8, 4, 2]


@pytest.mark.parametrize("field,value", [("block_n", 24), ("block_h", 8), ("num_warps", 3), ("splits", 0),
                                         ("merge_d", 24), ("merge_d", -16), ("value_d", 48), ("programs", -1),
                                         ("float32_block_n", 8), ("float32_block_n", 24), ("merge_warps", 3),
                                         ("merge_warps", 0), ("merge_warps", 32)])
def test_invalid_tiles_are_refused_in_one_line(field, value):
    fields = dict(block_h=16, block_n=16, num_warps=4, num_stages=2, splits=1)
    fields[field] = value
    with pytest.raises(ValueError, match="AttentionTile"):
        AttentionTile(**fields)


def test_the_group_decode_needs_decode_once():
    """Without decode once the group decode's bf16 output on the GPU is wrong (session 31,
    H100, Triton 3.6: relative errors 0.66-3.5), so the pair is refused in one line."""
    with pytest.raises(ValueError, match="^AttentionTile.group_decode needs decode_once=True"):
        AttentionTile(16, 16, group_decode=True)
    assert AttentionTile(16, 16, group_decode=True, decode_once=True).label() == "h16 n16 w4 s3 x1 gd do"


def test_merge_and_value_columns_are_the_head_dim_unless_narrower():
    assert [AttentionTile(16, 16, merge_d=m).merge_columns(512) for m in (0, 128, 512, 1024)] == [512, 128, 512, 512]
    assert AttentionTile(16, 16).label() == "h16 n16 w4 s3 x1"
    assert AttentionTile(16, 16, merge_d=128).label() == "h16 n16 w4 s3 x1 m128"
    assert [AttentionTile(16, 16, value_d=v).value_columns(512) for v in (0, 256, 1024)] == [512, 256, 512]
    assert AttentionTile(16, 16, value_d=256).value_columns(512, packed=True) == 512
    assert AttentionTile(16, 16, merge_d=64, value_d=256).label() == "h16 n16 w4 s3 x1 m64 v256"
    assert AttentionTile(16, 16, splits=8, programs=256).label() == "h16 n16 w4 s3 x8 p256"


@pytest.mark.parametrize("t", [1, 3, 8, 64, 128, 512])
@pytest.mark.parametrize("heads", [16, 64, 128])
@pytest.mark.parametrize("block_h,cap,programs", [(16, 16, 256), (32, 4, 256), (32, 16, 100), (16, 8, 0)])
def test_splits_fill_the_programs_asked_up_to_the_cap(t, heads, block_h, cap, programs):
    """Checked against a direct search: the smallest power of two up to the cap whose
    programs (queries x head blocks x splits) reach ``programs``, else the cap; without
    ``programs`` the cap itself."""
    tile = AttentionTile(block_h, 16, splits=cap, programs=programs)
    head_blocks = -(-heads // min(block_h, heads))
    fills = [2**i for i in range(10) if 2**i <= cap and t * head_blocks * 2**i >= programs]
    want = (min(fills) if fills else cap) if programs else cap
    assert tile.splits_for(t, heads) == want


def test_heads_per_program_is_capped_by_the_head_count():
    tile = AttentionTile(block_h=32, block_n=16)
    assert [tile.heads_per_program(h) for h in (4, 16, 17, 64)] == [16, 16, 32, 32]


def test_split_plan_covers_the_keys_with_whole_tiles_and_no_empty_split():
    pytest.importorskip("triton")
    from runtime.kernels.attention import split_plan

    for block_n in (16, 32, 64):
        for splits in range(1, 33):
            for n_keys in range(1, 700, 7):
                per_split, n_split = split_plan(n_keys, splits, block_n)
                assert per_split % block_n == 0 and 1 <= n_split <= splits
                assert (n_split - 1) * per_split < n_keys <= n_split * per_split


def test_float32_operands_take_the_rows_float32_keys_per_tile():
    """A float32 key tile takes twice a bf16 one's shared memory: flash's 64-head rows on 64
    keys would ask for 279,296 bytes in float32, more than sm_90's 232,448, so those rows
    name 32 keys for float32 (bf16 and the other rows: ``block_n``)."""
    wide = AttentionTile(64, 64, num_warps=8, num_stages=2, float32_block_n=32)
    assert (wide.keys_per_tile(False), wide.keys_per_tile(True)) == (64, 32)
    assert AttentionTile(16, 64).keys_per_tile(True) == 64
    assert all(WIDE_TILES[key].keys_per_tile(True) == 32 and WIDE_TILES[key].keys_per_tile(False) == 64
               for key in ((64, 512), (PREFILL, 512)))
