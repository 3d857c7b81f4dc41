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


def _dead_pid() -> int:
    """A pid that no process holds now: a child that has exited and been reaped."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(proc.stdout)


def test_owner_records_where_its_pid_means_something():
    """Host, pid and start time, and the boot id and pid namespace, read back from /proc
    by hand."""
    me = this_process()
    assert me["pid"] == os.getpid()
    assert me["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert me["pid_namespace"] == os.readlink("/proc/self/ns/pid")
    stat = Path(f"/proc/{os.getpid()}/stat").read_text()
    assert me["process_start"] == int(stat.rsplit(")", 1)[1].split()[19])


def test_a_dead_pid_elsewhere_is_never_marked_interrupted():
    """The same dead pid is interrupted when the owner ran here, and left alone when it
    ran on another machine that shares the host name (another boot id), in another
    container on this kernel (another pid namespace), or on another host."""
    me = this_process()
    dead = {**me, "pid": _dead_pid()}
    assert is_gone(dead)
    assert not is_gone({**dead, "boot_id": "00000000-0000-0000-0000-000000000000"})
    assert not is_gone({**dead, "pid_namespace": "pid:[1]"})
    assert not is_gone({**dead, "host": "another-host"})
    legacy = {k: dead[k] for k in ("pid", "host", "process_start")}  # before boot id
    assert is_gone(legacy)


def test_a_run_from_another_machine_stays_running_in_the_store(tmp_path):
    """A store on a shared disk: a run begun on another machine with this host name and
    a pid that is dead here reads as running, and the next writer does not settle it."""
    path = tmp_path / "results.sqlite"
    with ResultsStore.open(path) as store:
        run = store.begin_run("f" * 64, identity={})
    elsewhere = {**this_process(), "pid": _dead_pid(), "boot_id": "another-boot"}
    _set_owner(path, run.run_id, elsewhere)
    with ResultsStore.open(path) as store:
        assert [r.status for r in store.runs()] == ["running"]
        assert store.settle_abandoned() == []
    _set_owner(path, run.run_id, {**elsewhere, "boot_id": this_process()["boot_id"]})
    with ResultsStore.open(path) as store:  # the same owner, had it been this machine
        assert [r.status for r in store.runs()] == ["interrupted"]


def _set_owner(path: Path, run_id: int, owner: dict) -> None:
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        identity = json.loads(conn.execute("SELECT identity_json FROM runs WHERE run_id = ?",
                                           (run_id,)).fetchone()[0])
        identity["owner"] = owner
        with conn:
            conn.execute("UPDATE runs SET identity_json = ? WHERE run_id = ?",
                         (json.dumps(identity), run_id))
    finally:
        conn.close()


def _raw_statuses(path: Path) -> list[str]:
    import sqlite3

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [row[0] for row in conn.execute("SELECT status FROM runs ORDER BY run_id")]
    finally:
        conn.close()
