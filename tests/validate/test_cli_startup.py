"""``v41val`` starts fast: building the app, ``--help`` and usage errors load none of the
heavy libraries (they cost seconds: scipy ~1.5 s, matplotlib ~0.7 s, torch more), and
``tasks list`` and ``report`` load only what they need along the data flow: no torch,
no ``datasets``, no GPQA decrypt (their times: ``benchmarks/cli_startup.py``).

Each check runs in a fresh interpreter, because this test process has long imported
them all; the child reports ``sys.modules`` in a file, apart from the CLI's own output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("torch", "scipy", "matplotlib", "numpy", "lm_eval", "datasets", "httpx",
         "fastapi", "uvicorn")

CHILD = """
import json, sys
report, args = sys.argv[1], json.loads(sys.argv[2])
code = None
try:
    if args is None:
        import v41val.cli.commands
    else:
        from v41val.cli import main
        main(args)
        code = 0
except SystemExit as exc:
    code = exc.code
gpqa = sys.modules.get("tasks.gpqa_data")
with open(report, "w") as out:
    json.dump({"code": code, "modules": sorted({m.split(".")[0] for m in sys.modules}),
               "full_modules": sorted(sys.modules),
               "gpqa_loads": gpqa.load_gpqa.cache_info().misses if gpqa else 0}, out)
"""


def run_child(tmp_path: Path, args: list[str] | None) -> tuple[dict, subprocess.CompletedProcess]:
    report = tmp_path / "modules.json"
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(report), json.dumps(args)],
        capture_output=True, text=True, timeout=120, env=_env(),
    )
    assert report.exists(), proc.stderr
    return json.loads(report.read_text()), proc


def _env() -> dict:
    return {**os.environ, "COLUMNS": "120"}  # rich wraps help text at the terminal width


def loaded_heavy(report: dict) -> list[str]:
    return [name for name in HEAVY if name in report["modules"]]


def test_importing_the_commands_loads_no_heavy_library(tmp_path):
    report, proc = run_child(tmp_path, None)
    assert proc.returncode == 0, proc.stderr
    assert "typer" in report["modules"]  # the child really built the app
    assert loaded_heavy(report) == []


@pytest.mark.parametrize("args", [
    ["--help"],
    ["demo", "--help"],
    ["import-lmeval", "--help"],
    ["tasks", "list", "--help"],
])
def test_help_loads_no_heavy_library(tmp_path, args):
    report, proc = run_child(tmp_path, args)
    assert report["code"] == 0, proc.stderr
    assert "Usage: v41val" in proc.stdout
    assert loaded_heavy(report) == []


def test_help_shows_the_defaults_from_the_light_module(tmp_path):
    """The signatures read validate.defaults; the library uses the same values."""
    from validate.demo.plan import DEFAULT_ITEMS
    from validate.demo.run import DEFAULT_WORKSPACE as DEMO_WORKSPACE
    from validate.runner.execute import DEFAULT_WORKSPACE, STORE_NAME

    _, demo = run_child(tmp_path, ["demo", "--help"])
    assert f"[default: {DEFAULT_ITEMS}]" in demo.stdout
    assert f"[default: {DEMO_WORKSPACE}]" in demo.stdout
    _, imp = run_child(tmp_path, ["import-lmeval", "--help"])
    assert f"[default: {DEFAULT_WORKSPACE / STORE_NAME}]" in imp.stdout


@pytest.mark.parametrize("args", [
    ["no-such-command"],
    ["compare", "a.jsonl", "b.jsonl", "--bootstrap", "many"],
    ["plan", "--task", "gsm8k"],  # --margin is required
])
def test_usage_error_is_exit_2_one_line_without_heavy_library(tmp_path, args):
    report, proc = run_child(tmp_path, args)
    assert report["code"] == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("v41val: error:"), proc.stderr
    assert proc.stdout == ""
    assert loaded_heavy(report) == []


def test_unknown_task_is_still_exit_2_one_line(tmp_path):
    import tasks

    report, proc = run_child(tmp_path, ["tasks", "show", "no_such_task"])
    assert report["code"] == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("v41val: error: unknown task 'no_such_task'")
    assert all(name in lines[0] for name in tasks.names())  # it lists the real tasks
    assert proc.stdout == ""


def test_tasks_list_reads_no_data_and_loads_no_torch_or_datasets(tmp_path):
    report, proc = run_child(tmp_path, ["tasks", "list", "--json"])
    assert report["code"] == 0, proc.stderr
    rows = {r["name"]: r["n_items"] for r in json.loads(proc.stdout)["tasks"]}
    assert rows["gpqa_diamond_zeroshot"] == 198 and rows["gsm8k"] == 1319
    assert [m for m in ("torch", "datasets", "scipy", "matplotlib") if m in report["modules"]] == []
    assert report["gpqa_loads"] == 0


def _stored_gpqa_run(tmp_path: Path) -> Path:
    """A small stored run on a registered GPQA task (the analysis asks the registry for
    its primary metric and budget, which used to load and decrypt the data)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "v41val_startup_store_fixture",
        Path(__file__).resolve().parent.parent / "reports" / "store_fixture.py")
    fixture = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = fixture  # its dataclasses look their module up
    spec.loader.exec_module(fixture)
    from validate.store import ResultsStore

    path = tmp_path / "results.sqlite"
    base, cand = fixture.outcomes_with(40, 20, 3, 2)
    with ResultsStore.open(path) as store:
        fixture.add_plan(store, fixture.PlanSpec(
            "feedc0de" * 8, {"base": base.tolist(), "cand": cand.tolist()},
            task="gpqa_diamond_cot_zeroshot", policy={"tasks": {
                "gpqa_diamond_cot_zeroshot": {"margin": 2.0}}}))
    return path


@pytest.mark.parametrize("fmt", ["terminal", "md", "json", "junit", "html"])
def test_report_loads_no_torch_or_datasets_and_decrypts_no_gpqa(tmp_path, fmt):
    store = _stored_gpqa_run(tmp_path)
    report, proc = run_child(tmp_path, ["report", "latest", "--store", str(store), "-f", fmt])
    assert report["code"] == 0, proc.stderr
    assert "gpqa_diamond_cot_zeroshot" in proc.stdout  # it really reported the run
    assert [m for m in ("torch", "datasets", "lm_eval", "httpx") if m in report["modules"]] == []
    assert "scipy.stats" not in report["full_modules"]  # validate.stats.distributions instead
    assert ("matplotlib" in report["modules"]) == (fmt == "html")  # plots: HTML only
    assert report["gpqa_loads"] == 0
