"""Ctrl-C for real: ``python -m v41val run`` in a child process gets SIGINT in its warm
(priming) pass and in its quality pass; each time it exits 130 within a bound, says so
on stderr and leaves its run marked "interrupted"; a third run resumes and completes
with exactly the rows an uninterrupted run stores.

The child's stderr is a pseudo-terminal, as a person's would be, so its progress bars
are on: the test waits for the priming bar to appear, then signals (no fixed sleeps;
waiting for the quality pass polls the store). SIGINT reaches the child at its default
disposition even when this test runs from a shell that ignores it (``cmd &``).
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from validate.decisions import EXIT_INTERRUPTED
from validate.interrupt import FIRST

pytestmark = pytest.mark.slow  # three runs of a real (micro) model in child processes

REPO = Path(__file__).resolve().parents[2]
ITEMS = 8
STOP_BOUND_S = 15.0  # SIGINT -> exit; one engine step plus interpreter exit (shared 2-core CPU)
QUICK_STOP_S = 5.0  # the same, where the phase itself would take much longer
READY_BOUND_S = 240.0

# concurrency 1 and 48 output tokens: the quality pass lasts seconds, long enough to
# signal it after its first stored responses; every request alone in its batch.
PLAN = f"""\
name = "ctrl-c"
baseline = "exact"
warm = true
concurrency = 1
fidelity_prompts = 0

[engine]
kind = "builtin"
preset = "micro"

[variants.exact]
swa = "exact"

[[tasks]]
name = "testbed_arith"
limit = {ITEMS}
max_gen_toks = 48
"""

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Child:
    """``python -m v41val ARGS`` with stderr on a pty (progress shown) and stdout piped."""

    def __init__(self, args: list[str]) -> None:
        self.master, slave = pty.openpty()
        env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "160", "TERM": "xterm"}
        self.proc = subprocess.Popen([sys.executable, "-m", "v41val", *args], cwd=REPO,
                                     stdout=subprocess.PIPE, stderr=slave, env=env,
                                     preexec_fn=_default_sigint)
        os.close(slave)
        self.err = ""

    def _read(self, timeout: float) -> None:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if ready:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the child closed its end
                return
            self.err += ANSI.sub("", chunk.decode(errors="replace"))

    def wait_for_text(self, text: str, bound: float) -> None:
        deadline = time.monotonic() + bound
        while text not in self.err:
            assert self.proc.poll() is None, f"exited {self.proc.returncode} first: {self.err}"
            assert time.monotonic() < deadline, f"no {text!r} on stderr: {self.err[-2000:]}"
            self._read(0.2)

    def wait_until(self, condition, bound: float) -> None:
        deadline = time.monotonic() + bound
        while not condition():
            assert self.proc.poll() is None, f"exited {self.proc.returncode} first: {self.err}"
            assert time.monotonic() < deadline, self.err[-2000:]
            self._read(0.05)

    def interrupt(self) -> tuple[int, float]:
        """SIGINT, then (exit code, seconds until the child exited)."""
        sent = time.monotonic()
        self.proc.send_signal(signal.SIGINT)
        return self.finish(STOP_BOUND_S), time.monotonic() - sent

    def finish(self, bound: float) -> int:
        deadline = time.monotonic() + bound
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                self.proc.kill()
                pytest.fail(f"still running {bound:.0f} s later: {self.err[-2000:]}")
            self._read(0.05)
        self._read(0.0)
        self.out = self.proc.stdout.read().decode()
        self.proc.stdout.close()
        os.close(self.master)
        return self.proc.returncode


def stored(store: Path) -> dict:
    """(variant, item) -> (response, engine metadata, stored_at) of every stored response."""
    if not store.exists():
        return {}
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as conn:
        try:
            rows = conn.execute(
                "SELECT q.variant, q.item_id, r.response_json, r.engine_json, r.stored_at "
                "FROM responses r JOIN requests q ON q.request_id = r.request_id").fetchall()
        except sqlite3.OperationalError:  # the schema is not written yet
            return {}
    return {(v, i): (json.loads(resp), json.loads(engine), at) for v, i, resp, engine, at in rows}


def statuses(store: Path) -> list[str]:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as conn:
        return [s for (s,) in conn.execute("SELECT status FROM runs ORDER BY run_id")]


def reference_rows(tmp_path: Path, plan_path: Path) -> dict:
    """What an uninterrupted run stores (in this process)."""
    from validate.plan import load_plan
    from validate.runner import run_plan
    from validate.store import ResultsStore

    path = tmp_path / "reference" / "results.sqlite"
    path.parent.mkdir()
    with ResultsStore.open(path) as store:
        run_plan(load_plan(plan_path), store)
    return stored(path)


def test_ctrl_c_stops_priming_and_quality_then_a_rerun_completes_the_same_rows(tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    workspace = tmp_path / "ws"
    store = workspace / "results.sqlite"
    args = ["run", str(plan), "--workspace", str(workspace)]

    # 1. the warm pass: the priming bar is up, nothing is stored yet
    child = Child(args)
    child.wait_for_text("exact: priming", READY_BOUND_S)
    code, took = child.interrupt()
    assert code == EXIT_INTERRUPTED, child.err[-2000:]
    assert took < STOP_BOUND_S
    assert FIRST in child.err and "marked interrupted" in child.err
    assert "terminate called" not in child.err and "Traceback" not in child.err
    assert statuses(store) == ["interrupted"]
    assert stored(store) == {}

    # 2. the quality pass: signal once two responses are stored
    child = Child(args)
    child.wait_until(lambda: len(stored(store)) >= 2, READY_BOUND_S)
    code, took = child.interrupt()
    assert code == EXIT_INTERRUPTED and took < STOP_BOUND_S, child.err[-2000:]
    assert statuses(store) == ["interrupted", "interrupted"]
    kept = stored(store)
    assert 2 <= len(kept) < ITEMS

    # 3. the rerun resumes: it asks only for what is missing and completes
    child = Child([*args, "--json"])
    assert child.finish(READY_BOUND_S) == 0, child.err[-2000:]
    execution = json.loads(child.out)["execution"]["variants"][0]
    assert execution["already_stored"] == len(kept)
    assert execution["sent"] == execution["stored"] == ITEMS - len(kept)
    assert statuses(store) == ["interrupted", "interrupted", "complete"]
    final = stored(store)
    assert {k: final[k] for k in kept} == kept  # the rows stored before Ctrl-C, untouched
    reference = reference_rows(tmp_path, plan)
    assert len(final) == ITEMS
    def answers(rows: dict) -> dict:
        return {k: (r[0], r[1]["output_token_ids"]) for k, r in rows.items()}

    assert answers(final) == answers(reference)


def test_ctrl_c_stops_a_long_warm_pass_within_seconds(tmp_path):
    """40 prompts to prime take far longer than the bound; the stop takes one torch op
    (the builtin engine primes in the main thread; it used to finish the whole pass)."""
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN.replace(f"limit = {ITEMS}", "limit = 40"))
    child = Child(["run", str(plan), "--workspace", str(tmp_path / "ws")])
    child.wait_for_text("exact: priming", READY_BOUND_S)
    code, took = child.interrupt()
    assert code == EXIT_INTERRUPTED and took < QUICK_STOP_S, (took, child.err[-2000:])
    primed = [int(n) for n in re.findall(r"exact: priming\D*?(\d+)/40", child.err)]
    assert primed and max(primed) < 40  # it stopped mid-pass
    assert statuses(tmp_path / "ws" / "results.sqlite") == ["interrupted"]


def test_a_second_ctrl_c_exits_at_once_without_an_abort(tmp_path):
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN.replace(f"limit = {ITEMS}", "limit = 40"))
    child = Child(["run", str(plan), "--workspace", str(tmp_path / "ws")])
    child.wait_for_text("exact: priming", READY_BOUND_S)
    child.proc.send_signal(signal.SIGINT)
    child.wait_for_text(FIRST, STOP_BOUND_S)  # the first was handled; now the second
    if child.proc.poll() is None:
        child.proc.send_signal(signal.SIGINT)
    code = child.finish(STOP_BOUND_S)
    assert code == EXIT_INTERRUPTED, child.err[-2000:]  # 130, not SIGABRT's 134
    assert "terminate called" not in child.err


def test_ctrl_c_stops_calibrate_within_seconds(tmp_path):
    """``calibrate`` (fidelity mode: four planted levels on a micro model) shows its bar
    from the start and stops mid-way on Ctrl-C."""
    child = Child(["calibrate", "--preset", "micro", "--task", "testbed_arith", "--limit", "24",
                   "--max-new-tokens", "32"])
    child.wait_for_text("calibrate: planted levels", READY_BOUND_S)
    code, took = child.interrupt()
    assert code == EXIT_INTERRUPTED and took < QUICK_STOP_S, (took, child.err[-2000:])
    levels = [int(n) for n in re.findall(r"planted levels\D*?(\d+)/4", child.err)]
    assert levels and max(levels) < 4
    assert FIRST in child.err and "terminate called" not in child.err and child.out == ""
