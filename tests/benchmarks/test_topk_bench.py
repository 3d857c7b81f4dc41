"""benchmarks/topk.py off the GPU: bad flags are one line and exit 2; the forced splits it
times are the ones its docstring promises (>= 2 chunks, at most N / 2 candidates, not the
policy's own split), worked out by hand; every split shape gets a policy row."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchmarks.topk import SPLIT_SHAPES, forced_splits, main, parse_fields
from runtime.kernels.topk_tiles import CHAINED, TopkSplit, TopkSplitPolicy


@pytest.mark.parametrize(("argv", "message"), [
    (["--tilings", "4096"], "--tilings: expected groups:num_warps[:unroll]"),
    (["--chunks", "8192:1024:8:2"], "--chunks: expected chunk[:groups[:warps]][,...]"),
    (["--chunks", "3000"], "--chunks: expected chunk[:groups[:warps]][,...]"),
    (["--chunks", "8192:1024:64"], "--chunks: expected chunk[:groups[:warps]][,...]"),
])
def test_bad_flags_are_one_line_and_exit_2(argv, message, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"benchmarks/topk.py: {message}") and err.count("\n") == 1


def test_forced_splits_at_128k():
    policy = CHAINED  # forced splits are chained ones, left out where they are the chained policy's own
    chunks = parse_fields("4096,8192,16384,32768:1024:4,65536:512", (1, 2, 3))
    # k = 512, T = 1: the policy takes 16 x 8192 itself; 65536 is 2 chunks with its own groups
    assert forced_splits(policy, chunks, 131072, 1, 512) == {
        "chunk 4096": TopkSplit(32, 4096, 1024, 8), "chunk 16384": TopkSplit(8, 16384, 1024, 8),
        "chunk 32768:1024:4": TopkSplit(4, 32768, 1024, 4), "chunk 65536:512": TopkSplit(2, 65536, 512, 8)}
    # k = 2048 at 64k keys: 4096 gives 16 x 2048 = N / 2 candidates (timed), 16384 is the
    # policy's split, 65536 one chunk; at 128k keys 4096 gives 32 x 2048 = N / 2 again
    assert set(forced_splits(policy, chunks, 65536, 1, 2048)) == {"chunk 4096", "chunk 8192",
                                                                   "chunk 32768:1024:4"}
    assert "chunk 4096" in forced_splits(policy, chunks, 131072, 1, 2048)
    assert "chunk 4096" not in forced_splits(policy, chunks, 131072, 1, 4096)  # N candidates
    # k = 4096 is above the table: groups 4096 unless given
    assert forced_splits(policy, chunks, 131072, 1, 4096)["chunk 16384"] == TopkSplit(8, 16384, 4096, 8)


def test_every_split_shape_splits_under_the_policy():
    """The split shapes are the ones the registry's top-k splits (else the set times nothing new)."""
    policy = TopkSplitPolicy()
    assert all(policy.split(t, n, k).chunks >= 2 for n, t, k in SPLIT_SHAPES)


def test_resident_rows_are_the_fitting_twins():
    """Every run has the policy's split (row-bound since session 26), the chained policy's
    where it differs, and the forced chained splits; --resident adds the resident twin of the
    chained policy's split (in two launches and in one) and of each forced split whose chunk
    and candidate row fit a program (16,384 keys): at 128k keys, k = 512, chunks of 4,096
    (32 x 512 candidates) and 16,384 fit, 32,768 does not; at 64 rows the resident policy's
    chunks outgrow a program, so it adds no row of its own."""
    from benchmarks.topk import build_kernels, variants

    kernels = build_kernels({"4096:8": (4096, 8)}, resident=True)
    chunks = parse_fields("4096,16384,32768", (1, 2, 3))
    rows = {label: split for label, split, _ in variants(kernels, chunks, 131072, 1, 512, True)}
    assert rows == {"one pass 4096:8": "one pass", "policy": "32 x 4096 w8 row bound",
                    "policy chained": "16 x 8192 g1024 w8",
                    "chunk 4096": "32 x 4096 g1024 w8", "chunk 16384": "8 x 16384 g1024 w8",
                    "chunk 32768": "4 x 32768 g1024 w8", "policy resident": "16 x 8192 g1024 w8 resident",
                    "policy resident one launch": "16 x 8192 g1024 w8 resident one launch",
                    "chunk 4096 resident": "32 x 4096 g1024 w8 resident",
                    "chunk 16384 resident": "8 x 16384 g1024 w8 resident"}
    # 64 rows: the row-bound rule gives no split, so the policy's split is the chained one
    at_64 = {label: split for label, split, _ in variants(kernels, {}, 131072, 64, 512, False)}
    assert at_64 == {"one pass 4096:8": "one pass", "policy": "4 x 32768 g1024 w8"}
    assert "resident" not in build_kernels({"4096:8": (4096, 8)})


def test_row_bound_rows_are_the_policy_and_the_fitting_twins():
    """--row-bound adds the policy's row-bound split with dependent launches, with the
    other candidate tiling of its last launch (one tile or two), with the other count of
    group maxima per k (4 or 8), and the row-bound twin of
    each forced split whose chunk fits a program (16,384 keys) and is not the policy's own
    split: at 128k keys, k = 512, one row, chunks of 16,384 (4,096 is the
    policy's, 32,768 does not fit); at 64 rows the policy does not split by rows bound."""
    from benchmarks.topk import build_kernels, variants

    kernels = build_kernels({"4096:8": (4096, 8)}, row_bound=True)
    chunks = parse_fields("4096,16384,32768", (1, 2, 3))
    rows = {label: split for label, split, _ in variants(kernels, chunks, 131072, 1, 512, True)
            if "row bound" in label}
    tiles = "two tiles" if kernels["row bound tiles"].policy.row_bound.first_list_per_k else "one tile"
    count = "four" if kernels["row bound maxima"].policy.row_bound.maxima_per_k == 4 else "eight"
    assert rows == {"policy row bound pdl": "32 x 4096 w8 row bound", f"policy row bound {tiles}": "32 x 4096 w8 row bound",
                    f"policy row bound {count} maxima": "32 x 4096 w8 row bound",
                    "chunk 16384 row bound": "8 x 16384 w8 row bound"}
    assert kernels["row bound pdl"].policy.dependent_select and not kernels["policy"].policy.dependent_select
    default, other = kernels["policy"].policy.row_bound, kernels["row bound tiles"].policy.row_bound
    assert {default.first_list_per_k, other.first_list_per_k} == {0, 2} and replace(other, first_list_per_k=0) == \
        replace(default, first_list_per_k=0)
    other = kernels["row bound maxima"].policy.row_bound
    assert {default.maxima_per_k, other.maxima_per_k} == {4, 8} and replace(other, maxima_per_k=4) == \
        replace(default, maxima_per_k=4)
    assert not any("row bound" in label for label, _, _ in variants(kernels, {}, 131072, 64, 512, False))
    assert "row bound pdl" not in build_kernels({"4096:8": (4096, 8)})


def test_a_run_cut_short_keeps_the_shapes_it_timed(tmp_path):
    """save() after every shape: the JSON holds the rows so far and the note shows them."""
    import json

    from benchmarks.topk import Row, save

    env = {"gpu": "NVIDIA H200", "nvidia_smi": "x", "torch": "2.11", "triton": "3.6", "cuda": "13.0"}
    row = Row("randn", 131072, 1, 512, "policy resident", "16 x 8192 g1024 w8 resident", True, 0.2, 0.4, 0.1,
              0.09, 0.1, 0.012, 0.03)
    save(tmp_path, "topk_h200", env, "cmd", [row])
    doc = json.loads((tmp_path / "topk_h200.json").read_text())
    assert [r["kernel"] for r in doc["rows"]] == ["policy resident"] and doc["command"] == "cmd"
    note = (tmp_path / "topk_h200.md").read_text()
    assert "| randn | 131072 | 1 | 512 | policy resident | 16 x 8192 g1024 w8 resident | yes |" in note
    assert "| 0.0120 | 8.3x | 2.5x |" in note  # torch.topk graph / Triton graph, one pass / Triton
