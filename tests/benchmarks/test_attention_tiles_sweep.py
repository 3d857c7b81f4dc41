"""benchmarks/attention_tiles.py off the GPU: bad flags are one line and exit 2, and the
suggested TILES rows are the candidates with the best geometric mean of time / best
time over a bucket's cases (worked out by hand on made-up timings)."""

from __future__ import annotations

import pytest

from benchmarks.attention_tiles import (
    CaseResult,
    Shape,
    Timing,
    as_row,
    main,
    markdown,
    suggestions,
    verdict,
)
from runtime.kernels.attention_tiles import AttentionTile


@pytest.mark.parametrize(("argv", "message"), [
    (["--block-n", "24"], "AttentionTile.block_n: expected a power of two, got 24"),
    (["--splits", "0"], "AttentionTile: num_stages and splits must be >= 1"),
    (["--t", "0", "8"], "--t expects positive query counts, got [0, 8]"),
    (["--group-decode", "1"], "AttentionTile.group_decode needs decode_once=True"),
])
def test_bad_flags_are_one_line_and_exit_2(argv, message, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"benchmarks/attention_tiles.py: {message}") and err.count("\n") == 1
    assert not list(tmp_path.iterdir())


def test_candidates_leave_out_the_group_decode_without_decode_once():
    """AttentionTile refuses the group decode without decode once (wrong bf16 output on the
    GPU): where the product holds both decode once values, the pair is left out, and the
    group decode's twin turns decode once on with it."""
    from benchmarks.attention_tiles import TWIN_NEEDS, build_parser, candidates_from

    args = build_parser().parse_args(["--block-h", "16", "--block-n", "16", "--warps", "4", "--stages", "3", "--splits", "1",
                        "--group-decode", "0", "1", "--decode-once", "0", "1"])
    switches = [(t.group_decode, t.decode_once) for t in candidates_from(args)]
    assert switches == [(False, False), (False, True), (True, True)]
    AttentionTile(16, 16, group_decode=True, **TWIN_NEEDS["group_decode"])  # a valid twin


def case(t, scale, times, layout="ring", heads=16):
    shape = Shape(scale, t, layout, heads, 512, 128, 512)
    return CaseResult(shape, "a", [Timing(label, ms, 0.0) for label, ms in times.items()])


def test_suggestions_take_the_best_geometric_mean_per_bucket():
    a, b, c = "h16 n16 w4 s3 x16", "h16 n32 w8 s2 x8", "h32 n64 w4 s2 x4"
    results = [
        # bucket 1: b is 1.0x and 1.21x of the best (geomean 1.1); a is 1.5x and 1.0x (1.22)
        case(1, "mid", {a: 1.5, b: 1.0, c: 2.0}),
        case(1, "flash", {a: 1.0, b: 1.21, c: None}),  # c could not be captured at flash: no row
        # bucket 64: c wins everywhere
        case(64, "mid", {a: 3.0, b: 2.0, c: 1.0}),
        # bucket 64 on packed caches: a PACKED_TILES row of its own, a wins
        case(64, "mid", {a: 1.0, b: 2.0, c: 8.0}, layout="ring_packed"),
        # 64 heads: bucket 64 has wide rows (loaded and packed), so those cases suggest them
        # alone (b wins, though c wins the shared rows); bucket 1 has none, so a 64-head case
        # there would count toward TILES (none here: the bucket-1 means above stay as they are)
        case(64, "flash", {a: 2.0, b: 1.0, c: 3.0}, heads=64),
        case(64, "flash", {a: 1.5, b: 1.0, c: 4.0}, layout="ring_packed", heads=64),
    ]
    got = suggestions(results)
    assert set(got) == {(1, "TILES"), (64, "TILES"), (64, "PACKED_TILES"), (64, "WIDE_TILES"),
                        (64, "PACKED_WIDE_TILES")}
    assert got[(1, "TILES")][0] == b and got[(1, "TILES")][1] == pytest.approx(1.1)
    assert got[(64, "TILES")] == (c, pytest.approx(1.0)) and got[(64, "PACKED_TILES")] == (a, pytest.approx(1.0))
    assert got[(64, "WIDE_TILES")] == (b, pytest.approx(1.0)) and got[(64, "PACKED_WIDE_TILES")][0] == b
    row = as_row(1, 512, b)
    assert row == "(1, 512): AttentionTile(16, 32, num_warps=8, num_stages=2, splits=8),"
    assert AttentionTile(16, 32, num_warps=8, num_stages=2, splits=8).label() == b
    merged = AttentionTile(32, 16, num_warps=4, num_stages=3, splits=16, merge_d=128, value_d=256)
    assert as_row(8, 512, merged.label()) == ("(8, 512): AttentionTile(32, 16, num_warps=4, num_stages=3, "
                                              "splits=16, merge_d=128, value_d=256),")
    assert as_row(8, 512, AttentionTile(32, 16, value_d=128).label()).endswith("splits=1, value_d=128),")
    filling = AttentionTile(16, 32, num_warps=8, splits=16, merge_d=256, programs=256)
    assert as_row(8, 512, filling.label()) == ("(8, 512): AttentionTile(16, 32, num_warps=8, num_stages=3, "
                                               "splits=16, merge_d=256, programs=256),")
    prefetching = AttentionTile(64, 32, num_warps=8, num_stages=2, splits=16, programs=128, prefetch_ids=True)
    assert prefetching.label() == "h64 n32 w8 s2 x16 p128 pf"
    assert as_row(64, 512, prefetching.label()) == ("(64, 512): AttentionTile(64, 32, num_warps=8, num_stages=2, "
                                                    "splits=16, programs=128, prefetch_ids=True),")
    both = AttentionTile(64, 32, num_warps=8, num_stages=3, prefetch_ids=True, ids_ahead=True)
    assert both.label() == "h64 n32 w8 s3 x1 pf ia"
    assert as_row(0, 512, both.label()) == ("(0, 512): AttentionTile(64, 32, num_warps=8, num_stages=3, splits=1, "
                                            "prefetch_ids=True, ids_ahead=True),")
    grouped = AttentionTile(32, 16, splits=4, group_decode=True, decode_once=True)
    assert grouped.label() == "h32 n16 w4 s3 x4 gd do"
    assert as_row(64, 512, grouped.label()) == ("(64, 512): AttentionTile(32, 16, num_warps=4, num_stages=3, "
                                                "splits=4, group_decode=True, decode_once=True),")
    wide = AttentionTile(64, 64, num_warps=8, num_stages=2, prefetch_ids=True, float32_block_n=32)
    assert wide.label() == "h64 n64 w8 s2 x1 pf f32n32"
    assert as_row(0, 512, wide.label()) == ("(0, 512): AttentionTile(64, 64, num_warps=8, num_stages=2, splits=1, "
                                            "prefetch_ids=True, float32_block_n=32),")
    merging = AttentionTile(16, 32, splits=16, merge_d=256, merge_warps=2, merge_tail=False, ids_ahead=True)
    assert merging.label() == "h16 n32 w4 s3 x16 m256 ia mw2"
    assert as_row(8, 512, merging.label()) == ("(8, 512): AttentionTile(16, 32, num_warps=4, num_stages=3, "
                                               "splits=16, merge_d=256, ids_ahead=True, merge_warps=2),")
    assert AttentionTile(16, 32, merge_warps=4).label() == "h16 n32 w4 s3 x1"  # the default is not labelled
    env = {"gpu": "NVIDIA H200", "nvidia_smi": "-", "torch": "-", "triton": "-", "cuda": "-"}
    note = markdown({"environment": env, "command": "cmd"}, results, 0.0025, got)
    assert row in note and f"| mid T=1 ring | 0.71 MB | - | a | - | {b} | 1000.0 |" in note
    packed_rows = note.split("`PACKED_TILES`")[1].split("```")[1]
    assert as_row(64, 512, a) in packed_rows and as_row(64, 512, c) not in packed_rows
    wide_rows = note.split("`WIDE_TILES`")[1].split("```")[1]
    assert as_row(64, 512, b) in wide_rows and as_row(64, 512, c) not in wide_rows
    assert f"failed: {c} (no CUDA graph)" in note


def test_packed_ring_bytes_are_the_formats_sizes():
    """mid at T=64: keys 128 x (512 + 16) + 512 x (256 + 32) bytes a query instead of
    (128 + 512) x 1024; q, output and ids unchanged."""
    deq = Shape("mid", 64, "ring", 16, 512, 128, 512)
    packed = Shape("mid", 64, "ring_packed", 16, 512, 128, 512)
    assert deq.bytes - packed.bytes == 64 * (640 * 1024 - (128 * 528 + 512 * 288))


def test_verdicts_follow_the_issue_goals():
    small = Shape("mid", 1, "ring", 16, 512, 128, 512)  # 0.71 MB: launch-bound goal
    big = Shape("mid", 64, "ring", 16, 512, 128, 512)  # 45.4 MB: roofline goal
    assert small.bytes < 4 * 2**20 <= big.bytes
    assert verdict(small, 0.005, 0.0025)[1].startswith("met (2.0x")
    assert verdict(small, 0.006, 0.0025)[1].startswith("not met")
    ideal_ms = big.bytes / 4.3e12 * 1e3
    assert verdict(big, ideal_ms / 0.6, 0.0025)[1].startswith("met (60%")
    assert verdict(big, ideal_ms / 0.59, 0.0025)[1].startswith("not met")


def counting_timer():
    """A stand-in for the GPU timer (fns -> ms each): runs each call, counts it, and gives
    each a new time (so timings taken again from a program already timed are visible)."""
    calls = []

    def timer(fns):
        timer.batches.append(len(fns))
        out = []
        for fn in fns:
            fn()
            calls.append(1)
            out.append(0.01 * len(calls))
        return out

    timer.batches = []
    return timer, calls


@pytest.mark.parametrize("layout", ["engine", "ring", "ring_packed"])
def test_sweep_case_runs_every_candidate_once_and_checks_it(monkeypatch, layout):
    """The sweep's loop on CPU (interpreter, float32, a tiny shape, a stand-in timer that
    counts its calls): tilings that launch the same program are timed once, and every
    candidate's output is checked against the reference."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    import torch

    from benchmarks.attention_tiles import sweep_case
    from runtime.kernels.attention import FusedSparseAttention

    timer, calls = counting_timer()
    shape = Shape("tiny", 2, layout, 4, 32, 8, 40)
    # 48 keys: h16 and h32 run the same program for 4 heads; in 16-key tiles x2 is 2
    # splits of 32 keys, x8 and x16 both 3
    # splits; the grouped decode is its own program on packed caches only
    tiles = [AttentionTile(16, 16, splits=2), AttentionTile(32, 16, splits=2),
             AttentionTile(16, 16, splits=8), AttentionTile(16, 16, splits=16),
             AttentionTile(16, 16, splits=2, group_decode=True, decode_once=True)]
    result = sweep_case(shape, tiles, torch.Generator().manual_seed(0), FusedSparseAttention(), timer=timer,
                        device="cpu",
                        dtype=torch.float32)
    labels = [x.tile for x in result.timings]
    assert set(labels) == {result.table_tile, *(t.label() for t in tiles)} and len(labels) == len(set(labels))
    # the ring's batched core (ring only), the table row (h32 n32 x16: 2 splits of 32 keys), x2, x8 (= x16)
    assert len(calls) == 3 + (layout != "engine") + (layout == "ring_packed")
    # the candidates' distinct programs timed together (their graphs in turn), the core apart
    assert timer.batches == [1] * (layout != "engine") + [3 + (layout == "ring_packed")]
    assert (result.core_ms is not None) == (layout != "engine")
    assert all(x.error == "" and x.max_rel_err <= 2e-5 for x in result.timings)
    assert result.ms_of(tiles[0].label()) == result.ms_of(tiles[1].label())


def test_twins_time_the_table_row_with_each_switch_on(monkeypatch):
    """``twins``: the case's own table row, then that row with each switch on (here the
    tiny case's row split into window and top-k loops, and loading its ids a tile ahead),
    every one checked against the reference; the switches are AttentionTile's."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    import dataclasses

    import torch

    from benchmarks.attention_tiles import TWIN_FLAGS, sweep_case
    from runtime.kernels.attention import FusedSparseAttention

    fields = {f.name: f for f in dataclasses.fields(AttentionTile)}
    assert all(fields[flag].default is False for flag in TWIN_FLAGS)
    shape = Shape("tiny", 2, "ring", 4, 32, 8, 40)
    result = sweep_case(shape, [], torch.Generator().manual_seed(0), FusedSparseAttention(),
                        timer=lambda fns: [(fn(), 0.01)[1] for fn in fns], twins=("split_sources", "ids_ahead"), device="cpu",
                        dtype=torch.float32)
    assert [x.tile for x in result.timings] == [result.table_tile, result.table_tile + " ss",
                                                 result.table_tile + " ia"]
    assert all(x.error == "" and x.max_rel_err <= 2e-5 for x in result.timings)


def test_merge_warps_twins_time_the_row_with_its_merge_on_other_warps(monkeypatch):
    """``merge_warps_twins``: the case's table row, then that row with its merge launch on
    each warp count, every one checked against the reference and timed as a program of its
    own where the row splits (a merge to run); without a split there is no merge launch, so
    a twin is the row's own program and is not timed again."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    import torch

    from benchmarks.attention_tiles import effective, sweep_case
    from runtime.kernels.attention import FusedSparseAttention

    timer, calls = counting_timer()
    shape = Shape("tiny", 2, "engine", 4, 32, 8, 40)
    result = sweep_case(shape, [], torch.Generator().manual_seed(0), FusedSparseAttention(), timer=timer,
                        merge_warps_twins=(2, 8), device="cpu", dtype=torch.float32)
    assert [x.tile for x in result.timings] == [result.table_tile, result.table_tile + " mw2",
                                                 result.table_tile + " mw8"]
    assert len(calls) == 3 and all(x.error == "" and x.max_rel_err <= 2e-5 for x in result.timings)
    one_split = AttentionTile(16, 16, splits=1)
    assert effective(one_split, shape) == effective(AttentionTile(16, 16, splits=1, merge_warps=8), shape)
    assert effective(AttentionTile(16, 16, splits=2), shape) != effective(
        AttentionTile(16, 16, splits=2, merge_warps=8), shape)


@pytest.mark.parametrize("argv", [["--merge-warps-twins", "3"], ["--merge-warps", "32"]])
def test_impossible_merge_warps_are_one_line(argv, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "AttentionTile.merge_warps: expected" in err[0]
