"""The fused gate's tiling policy (runtime/kernels/gate_tiles.py) keeps the promises its
docstring makes, on the shapes that matter (mid, flash, tiny) and on odd ones. Pure
arithmetic: the kernel's parity at these tilings is tests/runtime/test_kernels_parity_gate.py."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from runtime.config import V41Config
from runtime.kernels.gate_tiles import GatePolicy, cdiv

SHAPES = [(V41Config.preset(n).hidden_size, V41Config.preset(n).n_routed_experts) for n in ("tiny", "mid", "flash")]
SHAPES += [(64, 24), (96, 384), (48, 40), (7168, 256)]
ROWS = [1, 2, 7, 8, 16, 17, 33, 64, 65, 300, 512, 4096, 16384]
POLICIES = [GatePolicy(), GatePolicy(programs=1000, tail_bytes=1 << 20, block_d=16, block_e=16),
            GatePolicy(tail_bytes=16 * 1024, block_d=128, block_e=32), GatePolicy(select_from=0, select_rows=4),
            GatePolicy(select_from=1 << 30, wide_select_from=1 << 30), GatePolicy(block_m=32, num_stages=5),
            GatePolicy(select_from=0, select_warps=1)]


@pytest.mark.parametrize("policy", POLICIES)
def test_every_tiling_covers_d_and_experts_and_respects_the_tail_budget(policy):
    for (d, e), t in itertools.product(SHAPES, ROWS):
        tiles = policy.tiling(t, d, e)
        splits = tiles.splits(d)
        where = f"t={t} d={d} e={e}: {tiles}"
        assert tiles.split_d % tiles.block_d == 0, where
        assert (splits - 1) * tiles.split_d < d <= splits * tiles.split_d, where  # no empty split
        assert splits <= policy.max_splits, where
        assert tiles.e_blocks(e) * tiles.block_e >= e and tiles.e_pad >= e, where
        for size in (tiles.block_m, tiles.block_e, tiles.block_d, tiles.sel_m, tiles.e_pad):
            assert size & (size - 1) == 0, where  # Triton's blocks are powers of two
        assert tiles.block_m >= 16 and tiles.block_e >= 16 and tiles.block_d >= 16, where  # tl.dot's minimum
        assert tiles.block_m % tiles.sel_m == 0, where
        if tiles.one_program(d, e):
            assert tiles.sel_m == tiles.block_m and tiles.block_e == tiles.e_pad and not tiles.select_rows, where
        elif splits > 1:  # what one selecting program reads: the row block's, or its select_rows'
            assert splits * (tiles.select_rows or min(t, tiles.block_m)) * e * 4 <= policy.tail_bytes, where
        # a selecting launch exactly when the ticket-holder's selection would be long or the
        # experts are wide (one row per selecting program there)
        wide = tiles.e_pad >= policy.wide_select_from
        long_selection = ((wide or min(t, tiles.block_m) * tiles.e_pad > policy.select_from)
                          and not tiles.one_program(d, e))
        assert bool(tiles.select_rows) == long_selection, where
        if tiles.select_rows:
            assert tiles.sel_m == tiles.select_rows == (1 if wide else policy.select_rows), where
            assert tiles.select_warps == policy.selecting_warps(tiles.e_pad, tiles.select_rows, t), where
            assert (tiles.select_grid(t) - 1) * tiles.select_rows < t <= tiles.select_grid(t) * tiles.select_rows, where


def test_decode_shapes_get_enough_programs_and_read_the_weight_once():
    """The point of the re-tiling (issue 16): at one row, flash's 3.9 MB weight is spread
    over at least 128 programs and mid's 131 KB over 32 (the first kernel: one); mid stops
    at 16 D splits of its 2 expert blocks (more splits measured slower: the row block's
    last program sums one partial per split); up to 16 rows make one row block, so every
    weight element is read by exactly one program."""
    policy = GatePolicy()
    for name, least in (("mid", 32), ("flash", 128)):
        c = V41Config.preset(name)
        d, e = c.hidden_size, c.n_routed_experts
        rows, cols = policy.tiling(1, d, e).grid(1, d, e)
        assert rows * cols >= least, name
        for t in (1, 8, 16):
            assert policy.tiling(t, d, e).grid(t, d, e)[0] == 1, (name, t)
    mid = V41Config.preset("mid")
    tiles = policy.tiling(1, mid.hidden_size, mid.n_routed_experts)
    assert (tiles.block_d, tiles.split_d, tiles.splits(mid.hidden_size)) == (128, 128, 16)


def test_one_program_policy_is_the_first_kernels_tiling():
    """16 rows per program over all experts and all of D (what benchmarks/gate_tiles.py
    measures as "old"); 32-wide D chunks once the experts pad past 128, as before."""
    policy = GatePolicy(one_program=True)
    for (d, e), t in itertools.product(SHAPES, ROWS):
        tiles = policy.tiling(t, d, e)
        assert tiles.grid(t, d, e) == (cdiv(t, 16), 1) and tiles.one_program(d, e)
        assert tiles.block_d == (64 if tiles.e_pad <= 128 else 32)


def test_every_call_selects_in_a_second_launch_flash_one_row_per_program():
    """Since session 43 every call selects in a second launch: flash (384 experts, padded to
    512) one row per program on 2 warps (512 pairs), a call of one row on 4; mid (32
    experts) 2 rows per program on one warp (2 x 32 pairs). Before (``select_from`` 1,024,
    no wide rule): flash's 1-2 rows and mid's decode (16-row blocks) selected in the
    ticket-holder's tail, flash from 3 rows 2 rows per program on 4 warps, mid from its
    64-row blocks. The partials are tiled the same either way."""
    policy, before = GatePolicy(), GatePolicy(select_from=1024, wide_select_from=1 << 30)
    flash, mid = V41Config.preset("flash"), V41Config.preset("mid")
    d, e = flash.hidden_size, flash.n_routed_experts
    for t in (1, 2, 3, 8, 64, 512, 4096):
        tiles = policy.tiling(t, d, e)
        assert tiles.select_rows == 1 and tiles.select_grid(t) == t and tiles.select_warps == (4 if t == 1 else 2), t
        assert replace(tiles, select_rows=0, sel_m=0, select_warps=0) == replace(
            before.tiling(t, d, e), select_rows=0, sel_m=0, select_warps=0), t  # the partials tiled as before
    for t in (1, 2):
        assert not before.tiling(t, d, e).select_rows
    for t in (3, 4, 5, 8, 64, 512, 4096):
        tiles = before.tiling(t, d, e)
        assert tiles.select_rows == 2 and tiles.select_grid(t) == -(-t // 2) and tiles.select_warps == 4, t
    d, e = mid.hidden_size, mid.n_routed_experts
    for t in (1, 2, 8, 16, 64, 65, 512, 4096):
        tiles = policy.tiling(t, d, e)
        assert tiles.select_rows == 2 and tiles.select_warps == 1, t
        assert replace(tiles, select_rows=0, sel_m=0, select_warps=0) == replace(
            before.tiling(t, d, e), select_rows=0, sel_m=0, select_warps=0), t
    for t in (1, 8, 16, 64):
        assert not before.tiling(t, d, e).select_rows
    for t in (65, 512, 4096):
        tiles = before.tiling(t, d, e)
        assert tiles.select_rows == 2 and tiles.select_warps == 1, t


@pytest.mark.parametrize(("select_rows", "e_pad", "num_warps", "warps"), [
    (2, 32, 4, 1), (2, 128, 4, 1), (2, 256, 4, 2), (2, 512, 4, 4), (4, 512, 4, 4), (2, 2048, 4, 4),
    (8, 512, 8, 8), (2, 512, 2, 2), (4, 64, 4, 1)])
def test_the_selecting_launch_takes_a_warp_per_256_pairs(select_rows, e_pad, num_warps, warps):
    """0 = by size: one warp per 256 (row, padded expert) pairs of a program's selection, at
    least one, at most the policy's warps; a set count wins."""
    assert GatePolicy(select_rows=select_rows, num_warps=num_warps).selecting_warps(e_pad) == warps
    assert GatePolicy(select_rows=select_rows, num_warps=num_warps, select_warps=2).selecting_warps(e_pad) == 2


def test_a_one_row_call_over_wide_experts_selects_on_the_policys_warps():
    """One row over 512 padded experts: ``num_warps`` (4), not the 2 its 512 pairs ask; from
    two rows, and at narrow experts (mid's 32) at any row count, the pair count decides; a
    set ``select_warps`` wins everywhere."""
    policy = GatePolicy()
    assert policy.selecting_warps(512, 1, 1) == 4 and policy.selecting_warps(512, 1, 2) == 2
    assert policy.selecting_warps(32, 2, 1) == 1 and policy.selecting_warps(256, 1, 1) == 1
    assert GatePolicy(num_warps=8).selecting_warps(512, 1, 1) == 8
    assert GatePolicy(select_warps=2).selecting_warps(512, 1, 1) == 2


def test_rows_per_program_stages_and_selecting_warps_reach_the_tiling_and_the_launch():
    """``block_m`` sets the rows per program (one-program tilings select them all from
    registers); ``num_stages`` becomes the launch's compile option, and the default's
    launches name none (Triton's default); ``select_warps`` sets the selecting launch's
    warps where there is one; bad values are refused."""
    from runtime.kernels.gate import gate_launches

    mid = V41Config.preset("mid")
    d, e = mid.hidden_size, mid.n_routed_experts
    tiles = GatePolicy(one_program=True, block_m=32, num_stages=4).tiling(4096, d, e)
    assert tiles.grid(4096, d, e) == (128, 1) and tiles.one_program(d, e) and tiles.sel_m == 32
    assert [kw["num_stages"] for _, kw in gate_launches(tiles, 4096, d, e, mid, ieee=False)] == [4]
    tiles = GatePolicy(block_m=32).tiling(4096, d, e)
    assert tiles.block_m == 32 and tiles.grid(4096, d, e)[0] == 128
    for t in (1, 64, 4096):
        assert all("num_stages" not in kw for _, kw in gate_launches(GatePolicy().tiling(t, d, e), t, d, e, mid, False))
    flash = V41Config.preset("flash")
    d, e = flash.hidden_size, flash.n_routed_experts
    tiles = GatePolicy(select_warps=1).tiling(8, d, e)  # flash selects in a second launch at every row count
    assert tiles.select_rows and [kw["num_warps"] for _, kw in gate_launches(tiles, 8, d, e, flash, False)] == [4, 1]
    before = GatePolicy(select_from=1024, wide_select_from=1 << 30)  # flash's 1-2 rows in one launch again
    assert replace(before, select_warps=1).tiling(1, d, e) == before.tiling(1, d, e)  # one launch: nothing to set
    for bad in ({"block_m": 24}, {"block_m": 8}, {"block_m": -16}, {"num_stages": -1}, {"select_warps": 3},
                {"wide_experts_rows": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            GatePolicy(**bad)


def test_rounds_pair_from_256_padded_experts_and_the_flag_reaches_every_selecting_launch():
    """``pair_from`` changes how rounds select, nothing about the tiles: by default flash
    (384 experts, padded to 512) pairs and mid (32) does not; 0 pairs everywhere, a huge
    value nowhere; every launch that selects (PHASE 0 or 2) gets the tiling's PAIRED, the
    partials' launch never (it compiles once for both forms)."""
    from runtime.kernels.gate import gate_launches

    for name, default_pairs in (("mid", False), ("flash", True)):
        c = V41Config.preset(name)
        d, e = c.hidden_size, c.n_routed_experts
        for t in (1, 3, 64, 512, 4096):
            tiles = GatePolicy().tiling(t, d, e)
            paired, plain = GatePolicy(pair_from=0).tiling(t, d, e), GatePolicy(pair_from=1 << 30).tiling(t, d, e)
            assert tiles.pair_reduce == default_pairs and paired.pair_reduce and not plain.pair_reduce
            assert replace(paired, pair_reduce=False) == plain == replace(tiles, pair_reduce=False)
            for form in (tiles, paired, plain):
                launches = [kw for _, kw in gate_launches(form, t, d, e, c, False)]
                assert {kw["PAIRED"] for kw in launches if kw["PHASE"] != 1} == {form.pair_reduce}
                assert all(not kw["PAIRED"] for kw in launches if kw["PHASE"] == 1)  # partials: nothing selects


@pytest.mark.parametrize("rows,flash_experts", [(1, 16), (7, 16), (8, 32), (16, 32), (17, 32), (32, 32), (33, 64),
                                                (64, 64)])
def test_decode_calls_widen_the_expert_block_with_the_rows_where_experts_are_many(rows, flash_experts):
    """``wide_experts_from``: flash's 384 experts (512 padded) take 32 per program from 8
    rows (``wide_experts_rows``) and 64 above 32, so each block's re-read of the rows' x
    covers more experts; mid's 32 stay at 16 per program; an explicit block_e, or a
    threshold above the experts or the rows, turns it off."""
    (mid_d, mid_e), (flash_d, flash_e) = SHAPES[1], SHAPES[2]
    assert GatePolicy().tiling(rows, flash_d, flash_e).block_e == flash_experts
    assert GatePolicy().tiling(rows, mid_d, mid_e).block_e == 16
    assert GatePolicy(block_e=16).tiling(rows, flash_d, flash_e).block_e == 16
    assert GatePolicy(wide_experts_from=1024).tiling(rows, flash_d, flash_e).block_e == 16
    assert GatePolicy(wide_experts_rows=65).tiling(rows, flash_d, flash_e).block_e == 16
