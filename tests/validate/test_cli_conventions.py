"""The CLI's contract: one JSON document with --json, exit 2 + one line on bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from v41val.cli import main
from v41val.cli.common import is_user_error
from validate.errors import ValidateInputError


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "from v41val.cli import main; main()", *args],
        capture_output=True, text=True, timeout=120,
    )


def test_version_json_is_one_document():
    proc = run_cli("version", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["python"] == ".".join(map(str, sys.version_info[:3]))


def test_unknown_command_is_exit_2_one_line():
    proc = run_cli("no-such-command")
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("v41val: error:"), proc.stderr
    assert proc.stdout == ""


def test_user_error_classification():
    assert is_user_error(ValidateInputError("bad plan"))
    assert not is_user_error(ValueError("a bug, not an input problem"))
    assert not is_user_error(RuntimeError("boom"))


def test_main_maps_user_error_to_exit_2(monkeypatch, capsys):
    from v41val.cli import app

    @app.command("raise-input-error-for-test", hidden=True)
    def _boom() -> None:
        raise ValidateInputError("plan.toml: field 'tasks' must be a list")

    with pytest.raises(SystemExit) as info:
        main(["raise-input-error-for-test"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err == "v41val: error: plan.toml: field 'tasks' must be a list\n"
