"""``v41val tasks``: one JSON document with --json, exit 2 + one line on bad input,
and no GPQA text outside an interactive terminal."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

import tasks
from v41val.cli import main


@dataclass(frozen=True)
class CliResult:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run_cli(capsys):
    """Run ``v41val`` in-process (data stays loaded between calls) with its real
    entry point, exit-code mapping included; stdout is not a terminal here."""

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = 0 if exc.code is None else int(exc.code)
        out = capsys.readouterr()
        return CliResult(code, out.out, out.err)

    return run


def test_check_json_passes_with_one_document(run_cli):
    proc = run_cli("tasks", "check", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["passed"] is True and doc["n_failed"] == 0
    subjects = {(r["check"], r["subject"]) for r in doc["results"]}
    for name in tasks.names():  # gold oracle 1.0 and wrong oracle 0.0 on every variant
        assert ("oracle", name) in subjects and ("items", name) in subjects
    assert {("checksum", f) for f in ("gsm8k/test.jsonl", "gsm8k/train.jsonl",
                                      "gpqa/dataset.zip")} <= subjects


def test_check_with_corrupted_data_exits_1(tmp_path, run_cli):
    import shutil

    from tasks.data_files import DEFAULT_DATA_DIR

    data_dir = tmp_path / "data"
    shutil.copytree(DEFAULT_DATA_DIR / "gsm8k", data_dir / "gsm8k")  # GPQA zip missing
    shutil.copytree(DEFAULT_DATA_DIR / "testbed", data_dir / "testbed")
    proc = run_cli("tasks", "check", "--json", "--data-dir", str(data_dir))
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    failed = [r for r in doc["results"] if not r["passed"]]
    assert failed and all("gpqa" in r["subject"] for r in failed)


@pytest.mark.parametrize("args", [("tasks", "show", "no_such_task"),
                                  ("tasks", "show", "gsm8k", "--item", "gsm8k-test-99999"),
                                  ("tasks", "show", "gpqa_diamond_zeroshot", "--item", "rec0")])
def test_show_unknown_is_exit_2_one_line(args, run_cli):
    proc = run_cli(*args)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("v41val: error:"), proc.stderr
    assert proc.stdout == ""


def test_show_gsm8k_json_has_the_prompt(run_cli):
    task = tasks.get("gsm8k")
    item = task.item("gsm8k-test-0007")
    proc = run_cli("tasks", "show", "gsm8k", "--item", item.id, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    request = task.render(item)
    assert doc["prompt"] == request.prompt
    assert doc["prompt_sha256"] == request.prompt_sha256
    assert doc["gen"]["max_gen_toks"] == 256


def test_show_gpqa_never_writes_text_off_terminal(run_cli):
    task = tasks.get("gpqa_main_cot_zeroshot")
    item = task.items()[5]
    for extra in (["--json"], []):
        proc = run_cli("tasks", "show", task.name, "--item", item.id, *extra)
        assert proc.returncode == 0, proc.stderr
        secrets = (item.question.strip()[:40], *(c[:40] for c in item.choices if len(c) > 8))
        leaked = any(secret in proc.stdout for secret in secrets)
        assert not leaked, f"GPQA text of {item.id} leaked into stdout (not shown here)"
    doc = json.loads(run_cli("tasks", "show", task.name, "--item", item.id, "--json").stdout)
    assert doc["item_id"] == item.id
    assert doc["choice_permutation"] == list(item.permutation)
    assert doc["prompt_sha256"] == task.render(item).prompt_sha256
    assert "prompt" not in doc and "messages" not in doc


def test_list_json(run_cli):
    proc = run_cli("tasks", "list", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["tasks"]
    assert [r["name"] for r in rows] == tasks.names()
    by_name = {r["name"]: r for r in rows}
    assert by_name["gsm8k"]["n_items"] == 1319 and by_name["gsm8k"]["max_gen_toks"] == 256
    assert by_name["gpqa_extended_zeroshot"]["n_items"] == 546
    assert by_name["gpqa_diamond_zeroshot"]["max_gen_toks"] is None

