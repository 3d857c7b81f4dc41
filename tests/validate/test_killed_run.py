"""A run whose process is killed (SIGKILL: no chance to say so) reads as
``interrupted``, not ``running`` forever: in ``report``, and in the store once the next
writer settles it; a run whose process lives stays ``running``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from v41val.cli import main
from validate.store import ResultsStore
from validate.store.owner import is_gone, this_process

HERE = Path(__file__).parent
ROOT = HERE.parent.parent

KILLED = """
import os, signal, sys
sys.path.insert(0, {reports!r})
from store_fixture import PlanSpec, add_plan
from validate.store import ResultsStore
store = ResultsStore.open({path!r})
add_plan(store, PlanSpec(plan_hash="d" * 64, outcomes={{"a": [1, 0, 1], "b": [1, 1, 1]}}))
store.begin_run("d" * 64, plan_name="nightly", identity={{"git": "cafe"}})
os.kill(os.getpid(), signal.SIGKILL)
"""


def _killed_store(tmp_path: Path) -> Path:
    path = tmp_path / "results.sqlite"
    code = KILLED.format(reports=str(ROOT / "tests" / "reports"), path=str(path))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    proc = subprocess.run([sys.executable, "-c", code], env=env, timeout=120)
    assert proc.returncode == -signal.SIGKILL
    return path


def test_a_killed_run_reads_as_interrupted_and_the_next_writer_records_it(tmp_path, capsys):
    path = _killed_store(tmp_path)
    with ResultsStore.open(path, read_only=True) as store:
        runs = store.runs()
    assert [r.status for r in runs] == ["complete", "interrupted"]
    assert runs[1].finished_at is None and "owner" not in runs[1].identity
    main(["report", "latest", "--store", str(path), "--format", "json"])
    assert json.loads(capsys.readouterr().out)["run"]["status"] == "interrupted"
    raw = _raw_statuses(path)
    assert raw == ["complete", "running"]  # reading it changed nothing
    with ResultsStore.open(path) as store:
        assert store.settle_abandoned() == [runs[1].run_id]
        assert store.settle_abandoned() == []
    assert _raw_statuses(path) == ["complete", "interrupted"]


def test_a_live_run_stays_running(tmp_path):
    with ResultsStore.open(tmp_path / "results.sqlite") as store:
        run = store.begin_run("e" * 64, identity={})
        assert store.runs()[0].status == "running" and run.owner == this_process()
        assert store.settle_abandoned() == []


def test_owner_checks():
    me = this_process()
    assert not is_gone(me)
    assert is_gone({**me, "process_start": me["process_start"] + 1})  # the pid was reused
    assert not is_gone({**me, "host": "another-host"})  # cannot tell from here
    assert not is_gone(None) and not is_gone({"pid": "x", "host": me["host"]})


def _raw_statuses(path: Path) -> list[str]:
    import sqlite3

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [row[0] for row in conn.execute("SELECT status FROM runs ORDER BY run_id")]
    finally:
        conn.close()
