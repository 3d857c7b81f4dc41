"""``v41val calibrate --quality`` end to end on the random ``micro`` model (accuracy at
the floor, so the mechanics, not the rates, are under test): the plan runs warm through
the runner (prefix hits, so replay engages), a rerun in the same workspace resumes, the
table and the JSON carry every pair and n, and bad flags are one-line exit-2 errors."""

from __future__ import annotations

import contextlib
import io
import json
import shutil

import pytest

from v41val.cli import main

BASE = ["calibrate", "--quality", "--preset", "micro", "--task", "testbed_arith", "--limit", "4",
        "--max-new-tokens", "4", "--noise", "1", "--replay-short", "2", "--n", "2,4",
        "--draws", "10"]


def exit_code(args) -> int:
    try:
        main(args)
    except SystemExit as exc:
        return exc.code
    return 0


def run(capsys, args):
    code = exit_code(args)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    """A workspace after one JSON calibration, and its JSON. A fixture, not the first
    test, so the rerun below finds that run whichever worker and order it gets (xdist may
    send a module's tests to different workers)."""
    workspace = tmp_path_factory.mktemp("calibrate")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):  # capsys is function-scoped: read stdout here
        code = exit_code([*BASE, "--workspace", str(workspace), "--json"])
    assert code == 0
    return workspace, json.loads(out.getvalue())


def test_quality_json_has_every_pair_and_n(calibrated):
    _, doc = calibrated
    assert doc["n_pool"] == 4 and doc["ns"] == [2, 4] and doc["window"] == 16
    assert [r["pair"] for r in doc["rows"]] == ["exact vs exact", "bounded vs exact",
                                                "noise-1 vs exact", "short-2 vs bounded",
                                                "short-2 vs exact"]
    assert all(len(r["cells"]) == 2 for r in doc["rows"])
    assert doc["variants"]["short-2"]["options"]["replay_tokens"] == 14
    # warm mode: every measured prompt hit the prefix cache, so replay had something to do
    assert all(v["prefix_hit_rate"] == 1.0 for v in doc["variants"].values())
    assert doc["rows"][0]["cells"][0]["observed"]["gate_fail"] == 0.0
    assert doc["store"].endswith("results.sqlite")


def test_quality_table_and_resume(capsys, calibrated):
    from validate.store import ResultsStore

    workspace, _ = calibrated

    md = workspace / "calibrate.md"
    code, out, err = run(capsys, [*BASE, "--workspace", str(workspace), "--markdown", str(md)])
    assert code == 0
    assert err == ""  # stderr is not a terminal here: no progress (only bars, on a tty)
    assert "| planted | pair | n=2 | n=4 |" in md.read_text()
    for fragment in ("quality calibration: testbed_arith", "detection: gate FAIL rate",
                     "significantly worse at alpha", "v41val plan", "short-2 vs bounded",
                     "n=4", "not fresh"):
        assert fragment in out
    with ResultsStore.open(workspace / "results.sqlite") as store:
        runs = store.runs()
    assert len(runs) == 2 and len({r.plan_hash for r in runs}) == 1  # the rerun resumed


@pytest.mark.parametrize("extra,fragment", [
    (["--n", "5,abc"], "--n: expected comma-separated integers"),
    (["--n", "0"], "--n: expected values >= 1"),
    (["--draws", "0"], "--draws"),
    (["--replay-short", "16"], "--replay-short: levels must lie in [1, 15]"),
    (["--margin", "1", "--policy", "gate.toml"], "--policy or --margin"),
    (["--alpha", "0.1", "--policy", "gate.toml"], "--policy or --margin/--alpha"),
    (["--noise", "x"], "--noise: expected comma-separated numbers"),
])
def test_bad_quality_flags_are_one_line_exit_2(capsys, extra, fragment):
    code, out, err = run(capsys, [*BASE, *extra])
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and out == ""
    assert len(lines) == 1 and lines[0].startswith("v41val: error:") and fragment in lines[0]


def test_replay_short_needs_quality(capsys):
    code, _, err = run(capsys, ["calibrate", "--replay-short", "2"])
    assert code == 2 and "--replay-short needs --quality" in err


def test_policy_without_the_task_is_exit_2(capsys, tmp_path):
    policy = tmp_path / "gate.toml"
    policy.write_text("[tasks.gsm8k]\nmargin = 1.0\n")
    code, _, err = run(capsys, [*BASE, "--policy", str(policy)])
    assert code == 2 and "no policy for task 'testbed_arith'" in err
    policy.write_text("[tasks.testbed_arith]\nmargin = 1.0\nmetric = 'exact_match,flexible-extract'\n")
    code, _, err = run(capsys, [*BASE, "--policy", str(policy), "--metric", "exact_match,strict-match"])
    assert code == 2 and "gates testbed_arith on 'exact_match,flexible-extract'" in err


def test_policy_file_sets_margin_alpha_and_metric(capsys, tmp_path, calibrated):
    workspace = shutil.copytree(calibrated[0], tmp_path / "workspace")  # its runs stay its own
    policy = tmp_path / "gate.toml"
    policy.write_text("[gate]\nalpha = 0.1\n[tasks.testbed_arith]\nmargin = 3.0\n"
                      "metric = 'exact_match,flexible-extract'\n")
    code, out, _ = run(capsys, [*BASE, "--policy", str(policy), "--workspace", str(workspace),
                                "--json"])
    doc = json.loads(out)
    assert code == 0 and doc["metric"] == "exact_match,flexible-extract"
    assert doc["policy"]["margin_points"] == 3.0 and doc["policy"]["alpha"] == 0.1
