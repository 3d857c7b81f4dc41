"""The fused mHC site's tiling policy (runtime/kernels/mhc_tiles.py): pure arithmetic, no kernel."""

from __future__ import annotations

from dataclasses import replace

import pytest

from runtime.kernels.mhc_tiles import INTERPRETED, PROJECTIONS, MhcPolicy


@pytest.mark.parametrize("t", [1, 2, 3, 16, 17, 64, 512, 1024, 4096, 4097])
@pytest.mark.parametrize("d", [256, 2048, 5120])
@pytest.mark.parametrize("policy", [MhcPolicy(), INTERPRETED, MhcPolicy(decode_projection="fma", programs=256),
                                    MhcPolicy(block_t=64, block_d=64, programs=2048, tail_rows=1)])
def test_tiles_cover_every_row_and_column_once(t, d, policy):
    tiles = policy.tiling(t, d, cuda=True)
    row_blocks, splits = tiles.grid(t, d)
    assert tiles.split_d % tiles.block_d == 0
    assert (splits - 1) * tiles.split_d < d <= splits * tiles.split_d  # no empty split
    assert (row_blocks - 1) * tiles.block_t < t <= row_blocks * tiles.block_t
    if tiles.projection != "fma":
        assert tiles.block_t >= 16  # tl.dot's smallest row tile
    else:
        assert tiles.block_t <= 8  # Triton turns 16-row multiply-sums into TF32 dots
    # finishing: whole tail blocks, the partials in chunks of at most tail_elements
    assert tiles.chunk >= 2 and tiles.chunk & (tiles.chunk - 1) == 0
    assert tiles.tail_t * tiles.chunk * 16 <= max(policy.tail_elements, tiles.tail_t * 2 * 16)
    assert tiles.tail == (t >= policy.tail_rows)
    if tiles.tail:
        assert tiles.block_t % tiles.tail_t == 0 and tiles.tail_t * tiles.tail_d <= max(policy.tail_elements, d)
    else:
        finish_rows, finish_programs = tiles.finish_grid(t, d)  # the splits and the coefficients' program
        assert finish_programs == splits + 1 and (finish_rows - 1) * tiles.tail_t < t <= finish_rows * tiles.tail_t


@pytest.mark.parametrize("t,d", [(1, 2048), (8, 5120), (64, 2048), (512, 2048), (4096, 5120)])
def test_split_reaches_the_program_target_unless_d_runs_out(t, d):
    policy = MhcPolicy()
    tiles = policy.tiling(t, d, cuda=True)
    row_blocks, splits = tiles.grid(t, d)
    chunks = -(-d // tiles.block_d)
    if splits < chunks:
        assert row_blocks * splits >= policy.programs
    else:
        assert tiles.split_d == tiles.block_d  # every program one D tile: as split as it gets


def test_the_projection_follows_the_row_count_and_device_unless_asked():
    policy = MhcPolicy()
    assert policy.tiling(4096, 2048, cuda=True).projection == "tf32x3"
    assert policy.tiling(4096, 2048, cuda=False).projection == "ieee"  # interpreted
    assert policy.tiling(1, 2048, cuda=True).projection == "fma"  # decode rows: no 16-row dot tile
    assert policy.tiling(2, 2048, cuda=True).projection == "fma"
    # decode calls (up to decode_rows, 192) from decode_bf16x3_from (3) rows: fn's three bf16
    # parts, on the decode tiles; above decode tf32x3
    assert [policy.tiling(t, 5120, cuda=True).projection for t in (3, 7, 8, 16, 48, 192, 193, 256)] == [
        "bf16x3", "bf16x3", "bf16x3", "bf16x3", "bf16x3", "bf16x3", "tf32x3", "tf32x3"]
    assert [policy.tiling(t, 5120, cuda=True).num_warps for t in (3, 192, 193)] == [
        policy.decode_warps, policy.decode_warps, policy.num_warps]
    assert [policy.tiling(t, 5120, cuda=True).block_d for t in (3, 192, 193)] == [
        policy.decode_block_d, policy.decode_block_d, policy.block_d]
    assert policy.tiling(8, 2048, cuda=True).bf16_operands
    assert policy.tiling(8, 2048, cuda=False).projection == "ieee"
    # without it: "tf32x2" from decode_tf32x2_from (8) rows, decode tiles up to 16 rows (the
    # rules before session 44 / 45)
    before = MhcPolicy(decode_bf16x3_from=1 << 30, decode_rows=16)
    assert [before.tiling(t, 2048, cuda=True).projection for t in (3, 7, 8, 16, 17)] == [
        "tf32x3", "tf32x3", "tf32x2", "tf32x2", "tf32x3"]
    assert MhcPolicy(decode_bf16x3_from=8).tiling(3, 2048, cuda=True).projection == "tf32x3"
    assert MhcPolicy(decode_bf16x3_from=1 << 30, decode_tf32x2_from=3).tiling(3, 2048, cuda=True).projection == "tf32x2"
    for name in ("decode_tf32x2_from", "decode_bf16x3_from"):
        with pytest.raises(ValueError, match=name):
            MhcPolicy(**{name: -1})
    asked = MhcPolicy(projection="ieee", decode_projection="fma")
    assert asked.tiling(4096, 2048, cuda=True).projection == "ieee"
    assert asked.tiling(192, 2048, cuda=True).projection == "fma"
    assert asked.tiling(193, 2048, cuda=True).projection == "ieee"


@pytest.mark.parametrize("t,block_t", [(1, 1), (2, 2), (3, 4), (9, 8), (16, 8), (4096, 8)])
def test_multiply_adds_take_as_few_rows_as_the_call_has_and_at_most_eight(t, block_t):
    policy = MhcPolicy(projection="fma", decode_projection="fma")
    assert policy.tiling(t, 2048, cuda=True).block_t == block_t
    assert MhcPolicy(decode_projection="tf32x3").tiling(min(t, 16), 2048, cuda=True).block_t == 16


def test_many_rows_finish_in_the_tail_and_decode_rows_in_a_second_launch():
    policy = MhcPolicy()
    assert policy.tiling(4096, 2048, cuda=True).tail
    assert not policy.tiling(1, 2048, cuda=True).tail and not policy.tiling(512, 2048, cuda=True).tail
    one_row = policy.tiling(1, 2048, cuda=True)
    assert one_row.tail_t == 1 and one_row.chunk >= one_row.splits(2048)  # one load of every split


def test_unsplit_is_one_program_per_row_block_over_all_of_d():
    tiles = INTERPRETED.tiling(40, 256, cuda=False)
    assert tiles.grid(40, 256) == (3, 1)
    assert tiles.split_d >= 256


@pytest.mark.parametrize("field", ["projection", "decode_projection"])
def test_an_unknown_projection_is_refused_by_name(field):
    with pytest.raises(ValueError, match=f"MhcPolicy.{field}: expected one of"):
        MhcPolicy(**{field: "bf16x2"})
    assert set(PROJECTIONS) == {"ieee", "tf32x3", "tf32x2", "bf16x3", "fma"}


def test_a_negative_reload_is_refused_by_name():
    with pytest.raises(ValueError, match="MhcPolicy.reload_d: expected >= 0"):
        MhcPolicy(reload_d=-1)


@pytest.mark.parametrize("t", [1, 2, 8, 64, 512, 4096])
def test_the_mixing_is_pinned_only_for_a_dot_in_the_mixing_loop_on_cuda(t):
    """PIN_MIX is inline PTX (no interpreter) and only matters where the mixing loop feeds a
    dot: not for multiply-add rows, not where the projection re-reads X'."""
    tiles = MhcPolicy().tiling(t, 2048, cuda=True)
    assert tiles.pin_mix == (tiles.projection != "fma" and tiles.reload_d == 0)
    assert tiles.pin_mix == (t > MhcPolicy().fma_rows)  # the defaults: every dot tiling projects while mixing
    assert not MhcPolicy().tiling(t, 2048, cuda=False).pin_mix
    assert not MhcPolicy(pin_mix=False).tiling(t, 2048, cuda=True).pin_mix
    assert not MhcPolicy(reload_d=128).tiling(t, 2048, cuda=True).pin_mix or t >= MhcPolicy().tail_rows


@pytest.mark.parametrize("t,expected", [(1, 0), (2, 0), (8, 128), (64, 128), (512, 128), (4096, 0)])
def test_the_reload_applies_to_dot_tilings_below_the_tail(t, expected):
    """Asked for (the default re-reads nowhere since the mixing is pinned:
    benchmarks/results/tile_sweep_h200_mhc_pin.md): the multiply-add rows never re-read X';
    dot tilings below ``tail_rows`` do; the tail only with ``tail_reload_d``. A chunk is a
    whole number of D tiles."""
    assert MhcPolicy().tiling(t, 5120, cuda=True).reload_d == 0
    assert MhcPolicy(reload_d=128).tiling(t, 5120, cuda=True).reload_d == expected
    tiles = MhcPolicy(reload_d=100, tail_reload_d=40).tiling(t, 5120, cuda=True)
    if tiles.projection != "fma":
        assert tiles.reload_d % tiles.block_d == 0 and 0 <= tiles.reload_d - (40 if tiles.tail else 100) < tiles.block_d


@pytest.mark.parametrize("t,rows,expected", [(1, 1, 1), (8, 1, 1), (16, 1, 1), (8, 4, 4), (3, 4, 4), (2, 8, 2),
                                             (17, 1, 8), (512, 1, 8)])
def test_decode_finishes_take_decode_finish_rows_per_program(t, rows, expected):
    """A row's coefficients are a serial chain, so decode calls finish a row (or a few) per
    program; above decode_rows (``decode_finish_to`` 0) the finish keeps 8-row programs
    (decode_rows 16 here, the default before session 45: 17 rows is the first above)."""
    tiles = MhcPolicy(decode_rows=16, decode_finish_rows=rows, decode_finish_to=0).tiling(t, 2048, cuda=True)
    assert not tiles.tail and tiles.tail_t == expected
    assert tiles.finish_grid(t, 2048)[0] == -(-t // expected)


@pytest.mark.parametrize("t,to,decode_finish", [(16, 0, True), (17, 0, False), (17, 64, True), (64, 64, True),
                                                (65, 64, False), (256, 256, True), (512, 256, False),
                                                (1024, 4096, False)])
def test_the_decode_finish_serves_calls_up_to_decode_finish_to(t, to, decode_finish):
    """Up to ``decode_finish_to`` rows (at least ``decode_rows``) and below the tail a call
    finishes as decode does: ``decode_finish_rows`` per program, ``decode_finish_warps``,
    ``decode_finish_registers``; above, ``finish_rows`` / ``finish_warps`` /
    ``finish_registers``; the ticket's tail (from ``tail_rows``) never. The sweep's tiles
    stay those of the row count (decode_rows 16 here, the default before session 45)."""
    policy = MhcPolicy(decode_rows=16, decode_finish_to=to, decode_finish_rows=2, decode_finish_warps=1,
                       finish_rows=8, finish_warps=2, decode_finish_registers=True, finish_registers=False)
    tiles = policy.tiling(t, 2048, cuda=True)
    assert tiles.tail == (t >= policy.tail_rows)
    assert (tiles.tail_t, tiles.finish_warps, tiles.finish_registers) == ((2, 1, True) if decode_finish else
                                                                          (8, 2, False))
    sweep = MhcPolicy(decode_rows=16, decode_finish_to=0).tiling(t, 2048, cuda=True)
    assert (tiles.block_t, tiles.block_d, tiles.split_d, tiles.num_warps) == (sweep.block_t, sweep.block_d,
                                                                              sweep.split_d, sweep.num_warps)


@pytest.mark.parametrize("t,rows,expected", [(17, 1, 1), (64, 2, 2), (512, 4, 4), (17, 32, 32), (20, 32, 32),
                                             (8, 2, 1), (512, 32, 32), (1024, 1, 8)])
def test_finishes_above_decode_take_finish_rows_per_program(t, rows, expected):
    """Above decode_rows the finishing launch's programs hold ``finish_rows`` rows (at most
    the row count rounded up to a power of two); decode calls keep decode_finish_rows and the
    ticket's tail its own 8 (decode_rows 16 here, the default before session 45)."""
    tiles = MhcPolicy(decode_rows=16, finish_rows=rows, decode_finish_to=0).tiling(t, 2048, cuda=True)
    assert tiles.tail_t == expected
    if not tiles.tail:
        assert tiles.finish_grid(t, 2048)[0] == -(-t // expected)


@pytest.mark.parametrize("name", ["decode_finish_rows", "finish_rows"])
@pytest.mark.parametrize("rows", [0, 3, -2])
def test_finish_rows_must_be_a_power_of_two(name, rows):
    with pytest.raises(ValueError, match=f"MhcPolicy.{name}: expected a power of two >= 1"):
        MhcPolicy(**{name: rows})


@pytest.mark.parametrize("name", ["decode_finish_to", "fma_mix_from", "dependent_finish_to", "finish_at_exit_from"])
def test_row_counts_must_not_be_negative(name):
    with pytest.raises(ValueError, match=f"MhcPolicy.{name}: expected a row count >= 0, got -1"):
        MhcPolicy(**{name: -1})


@pytest.mark.parametrize("t", [1, 2, 8, 64, 512, 4096])
def test_fma_mixing_is_taken_from_its_row_count(t):
    """``fma_mix_from`` reaches the tiling as asked, on the GPU and in the interpreter (tl.fma
    runs in both), and changes nothing else of the tiling; by default from 8 rows (the
    H200's and H100's sweeps, mhc_tiles.py)."""
    for cuda in (True, False):
        plain = MhcPolicy(fma_mix_from=1 << 30).tiling(t, 2048, cuda=cuda)
        assert not plain.fma_mix
        assert MhcPolicy(fma_mix_from=0).tiling(t, 2048, cuda=cuda) == replace(plain, fma_mix=True)
        assert MhcPolicy().tiling(t, 2048, cuda=cuda) == replace(plain, fma_mix=t >= 8)


def test_stages_reach_the_sweeping_launch_only():
    """``stages``: the sweep's ``num_stages`` (the finishing launch keeps Triton's default);
    0 leaves it to Triton (above decode by default; decode calls take ``decode_stages``, 2);
    a negative count is refused by name."""
    import torch

    from runtime.kernels.mhc import FINISH, site_launches

    for t in (8, 512, 4096):  # a second launch, and the tail's one launch
        tiles = MhcPolicy(stages=2).tiling(t, 2048, cuda=True)
        assert tiles.stages == 2
        launches = site_launches(tiles, t, 2048, True, torch.bfloat16)
        assert len(launches) == (1 if tiles.tail else 2)
        for _, kwargs in launches:
            assert kwargs.get("num_stages") == (None if kwargs["PHASE"] == FINISH.value else 2)
        default = site_launches(MhcPolicy().tiling(t, 2048, cuda=True), t, 2048, True, torch.bfloat16)
        decode = t <= MhcPolicy().decode_rows
        assert [kwargs.get("num_stages") for _, kwargs in default] == (
            [2 if decode and kwargs["PHASE"] != FINISH.value else None for _, kwargs in default])
        assert decode == (t == 8)
    with pytest.raises(ValueError, match="MhcPolicy.stages: expected >= 0"):
        MhcPolicy(stages=-1)


@pytest.mark.parametrize("t,decode", [(1, True), (48, True), (192, True), (193, False), (4096, False)])
def test_decode_stages_apply_to_decode_calls_only(t, decode):
    """``decode_stages``: the sweep's ``num_stages`` for decode calls (up to ``decode_rows``,
    192), 2 by default, 0 following ``stages``; calls above decode keep ``stages``."""
    policy = MhcPolicy(stages=4, decode_stages=3)
    assert policy.tiling(t, 5120, cuda=True).stages == (3 if decode else 4)
    assert MhcPolicy(stages=4, decode_stages=0).tiling(t, 5120, cuda=True).stages == 4
    assert MhcPolicy().tiling(t, 5120, cuda=True).stages == (2 if decode else 0)
    with pytest.raises(ValueError, match="MhcPolicy.decode_stages: expected >= 0"):
        MhcPolicy(decode_stages=-1)


@pytest.mark.parametrize("t,d,grid_default,grid_264,grid_396,grid_512", [
    (96, 5120, (6, 40), (6, 40), (6, 40), (6, 80)),  # 480 programs at 512 -> 240 of two D tiles
    (192, 5120, (12, 20), (12, 20), (12, 27), (12, 40)),  # 480 at 512 -> 324 of three, 240 of four
    (48, 5120, (3, 80), (3, 80), (3, 80), (3, 80)),  # 240 fits every target
    # mid (32 D tiles, up to 2048 the narrow target, 132): 99 programs of three tiles, 144 of
    # two at 264, 288 of one at 396 / 512
    (144, 2048, (9, 11), (9, 16), (9, 32), (9, 32)),
    (192, 2048, (12, 11), (12, 16), (12, 32), (12, 32)),
    (64, 2048, (4, 32), (4, 32), (4, 32), (4, 32)),  # 128 fits 132: every tile split
])
def test_decode_programs_size_the_decode_split_only(t, d, grid_default, grid_264, grid_396, grid_512):
    """``decode_programs``: the program target of decode calls' D split (264 by default; 0:
    ``programs``, 512), and ``narrow_decode_programs`` instead up to ``narrow_d`` (132 up to
    2048; 0: ``decode_programs`` everywhere); calls above decode keep ``programs``. The
    grids: row blocks of 16, D tiles of 64 split until row blocks x splits reaches the
    target, a split of whole tiles."""
    assert MhcPolicy().tiling(t, d, cuda=True).grid(t, d) == grid_default
    everywhere = dict(narrow_decode_programs=0)
    assert MhcPolicy(decode_programs=0, **everywhere).tiling(t, d, cuda=True).grid(t, d) == grid_512
    for target, grid in ((396, grid_396), (512, grid_512), (264, grid_264)):
        tiles = MhcPolicy(decode_programs=target, **everywhere).tiling(t, d, cuda=True)
        assert tiles.grid(t, d) == grid
        assert tiles.split_d * grid[1] >= d > tiles.split_d * (grid[1] - 1)
    # the narrow target up to narrow_d only: just below the hidden size, decode_programs again
    assert MhcPolicy(narrow_d=d - 1).tiling(t, d, cuda=True).grid(t, d) == grid_264
    assert MhcPolicy(narrow_d=d).tiling(t, d, cuda=True).grid(t, d) == (
        MhcPolicy(decode_programs=132, **everywhere).tiling(t, d, cuda=True).grid(t, d))
    above = MhcPolicy().decode_rows + 1
    assert MhcPolicy(decode_programs=8, narrow_decode_programs=8).tiling(above, d, cuda=True) == (
        MhcPolicy().tiling(above, d, cuda=True))
    # at most ``programs``: a policy that asks fewer programs splits decode calls less too
    assert MhcPolicy(programs=8).tiling(t, d, cuda=True) == MhcPolicy(programs=8, decode_programs=8).tiling(t, d, cuda=True)
    rows, splits = MhcPolicy(programs=8).tiling(t, d, cuda=True).grid(t, d)
    assert splits == min(d // 64, -(-8 // rows))  # 8 programs over the row blocks, whole D tiles
    with pytest.raises(ValueError, match="MhcPolicy.decode_programs: expected >= 0"):
        MhcPolicy(decode_programs=-1)
    with pytest.raises(ValueError, match="MhcPolicy.narrow_decode_programs: expected >= 0"):
        MhcPolicy(narrow_decode_programs=-1)
    with pytest.raises(ValueError, match="MhcPolicy.narrow_d: expected a hidden size >= 0"):
        MhcPolicy(narrow_d=-1)


@pytest.mark.parametrize("t,d,sweep_grid,project_grid,apart_d", [
    # 16-row sweep blocks, 64-column tiles split until 2048 programs; 64-row projection
    # blocks over the same splits, 64 columns (a divisor of every split)
    (4096, 2048, (256, 8), (64, 8), 64),  # 32 tiles in 8 splits of four
    (4096, 5120, (256, 8), (64, 8), 64),  # 80 tiles in 8 splits of ten: 640 columns
    (512, 2048, (32, 32), (8, 32), 64),  # 32 splits of one tile
    (300, 5120, (19, 80), (5, 80), 64),
])
def test_the_projection_apart_shares_the_sweeps_splits(t, d, sweep_grid, project_grid, apart_d):
    """``apart_from``: above decode, calls of at least that many rows sweep in the apart
    tiles and project in a launch of their own on the same splits (its partials line up
    with the sweep's), in tiles that divide a split; no tail, no pinned mixing, no re-read.
    Off by default, at decode, and for multiply-add projections."""
    policy = MhcPolicy(apart_from=256, reload_d=128, tail_reload_d=128)
    tiles = policy.tiling(t, d, cuda=True)
    assert tiles.apart and not tiles.tail and not tiles.pin_mix and tiles.reload_d == 0
    assert (tiles.block_t, tiles.block_d, tiles.num_warps) == (16, 64, 4)
    assert tiles.grid(t, d) == sweep_grid and tiles.project_grid(t, d) == project_grid
    assert tiles.apart_d == apart_d and tiles.split_d % tiles.apart_d == 0
    assert tiles.finish_grid(t, d) == (-(-t // tiles.tail_t), sweep_grid[1] + 1)
    # the split's columns do not divide the projection's tile: the tile is cut to a divisor
    cut = MhcPolicy(apart_from=256, apart_d=256, apart_sweep_d=32).tiling(4096, 5120, cuda=True)
    assert cut.split_d == 640 and cut.apart_d == 128
    assert not MhcPolicy().tiling(t, d, cuda=True).apart
    assert not MhcPolicy(apart_from=0).tiling(MhcPolicy().decode_rows, d, cuda=True).apart
    assert not MhcPolicy(apart_from=0, projection="fma").tiling(t, d, cuda=True).apart
    assert not MhcPolicy(apart_from=t + 1).tiling(t, d, cuda=True).apart


@pytest.mark.parametrize("name,value,expected", [
    ("apart_from", -1, "a row count >= 0"), ("apart_sweep_t", 3, "a power of two >= 1"),
    ("apart_sweep_d", 8, "a power of two >= 16"), ("apart_t", 48, "a power of two >= 16"),
    ("apart_d", 0, "a power of two >= 16"),
])
def test_apart_tiles_are_checked(name, value, expected):
    with pytest.raises(ValueError, match=f"MhcPolicy.{name}: expected {expected}"):
        MhcPolicy(**{name: value})
