"""The diagnostic flags of the kernel sweeps (``tile_sweep.py --sinkhorn-iters``,
``gate_tiles.py --topk``): an impossible count is one line and exit status 2 before any
GPU is needed, and a diagnostic run says so in its note, so its times are never read as
the released model's."""

from __future__ import annotations

import pytest
import torch

from benchmarks import gate_tiles, tile_sweep

ENV = {"gpu": "NVIDIA H200", "nvidia_smi": "NVIDIA H200, 580", "torch": "2.11", "triton": "3.6", "cuda": "13.0"}


@pytest.mark.parametrize(("module", "argv", "message"), [
    (tile_sweep, ["--sinkhorn-iters", "0"], "--sinkhorn-iters: expected a positive count, got 0"),
    (tile_sweep, ["--indexer-shapes", "8:8192", "8x8192"], "--indexer-shapes '8x8192': expected queries:keys, two "
                                                            "positive integers (e.g. 8:8192)"),
    (tile_sweep, ["--indexer-shapes", "0:8192"], "--indexer-shapes '0:8192': expected queries:keys, two positive "
                                                 "integers (e.g. 8:8192)"),
    (gate_tiles, ["--topk", "0"], "--topk: expected 1 to 32 (the fewest experts of --scales), got 0"),
    (gate_tiles, ["--topk", "33"], "--topk: expected 1 to 32 (the fewest experts of --scales), got 33"),
    (gate_tiles, ["--topk", "400", "--scales", "flash"], "--topk: expected 1 to 384 (the fewest experts of "
                                                         "--scales), got 400"),
    (gate_tiles, ["--only", "new", "select w9"], "--only: no variant labelled 'select w9' (see variants() and "
                                                 "STAGE_VARIANTS)"),
])
def test_impossible_counts_are_one_line(module, argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        module.main([*argv, "--out", str(tmp_path)])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(message)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU machine's stop at the GPU check")
def test_a_possible_count_gets_as_far_as_the_gpu_check(tmp_path, capsys):
    """100 of flash's 384 experts is a valid diagnostic (mid has only 32)."""
    assert gate_tiles.main(["--topk", "100", "--scales", "flash", "--out", str(tmp_path)]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_a_run_that_timed_nothing_writes_nothing(tmp_path, capsys, monkeypatch):
    """Every tiling asked for unfit at every row count: one line, exit 2, no result files
    (they were written after each case, so an empty run used to leave an empty result)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(gate_tiles, "environment", lambda: ENV)

    def run_nothing(*args):
        args[-2].append("mid T=1 'x': too many registers")  # unfit
        return []

    monkeypatch.setattr(gate_tiles, "run", run_nothing)
    assert gate_tiles.main(["--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("benchmarks/gate_tiles.py: no case was timed (unfit: mid T=1 'x': too many registers); "
                   "nothing written")
    assert list(tmp_path.iterdir()) == []


def test_a_diagnostic_run_is_labelled():
    floors = {"empty_us": 0.9, "load_store_us": 0.95}
    assert "hc_sinkhorn_iters` = 1 (the release: 20)" in tile_sweep.markdown(ENV, [], floors, "cmd", 1)
    assert "hc_sinkhorn_iters" not in tile_sweep.markdown(ENV, [], floors, "cmd")
    assert "top-1 instead of the release's top-6" in gate_tiles.markdown(ENV, [], "cmd", 0.9, 20, 1)
    assert "instead of the release" not in gate_tiles.markdown(ENV, [], "cmd", 0.9, 20)


def test_a_gate_baseline_folder_without_gate_py_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        gate_tiles.main(["--baseline", str(tmp_path), "--out", str(tmp_path)])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(f"--baseline {tmp_path}: no gate.py there")


def test_only_keeps_the_named_gate_variants_in_their_order():
    found = gate_tiles.variants(False, True)
    picked = gate_tiles.chosen(found, ("two launches select w1", "new"))
    assert [label for label, _ in picked] == ["new", "two launches select w1"]
    assert picked[1][1].select_warps == 1 and picked[1][1].select_from == 0
    assert gate_tiles.chosen(found, None) == found


def test_a_note_names_the_tilings_that_did_not_fit():
    note = gate_tiles.markdown(ENV, [], "cmd", 0.9, 20, unfit=["flash T=1 tail 16K stages 4"])
    assert "- Skipped, more shared memory than an SM has: flash T=1 tail 16K stages 4." in note
    assert "Skipped" not in gate_tiles.markdown(ENV, [], "cmd", 0.9, 20)
