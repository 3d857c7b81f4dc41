"""End to end: an engine streaming from a real loopback server into the store, killed
with SIGKILL mid-run, then rerun: nothing stored is requested again, and nothing is lost
but the requests that were in flight or answered and not yet committed.

The engine does not wait for the store: answers queue between the HTTP tasks and the
SQLite writer (so a slow disk cannot distort the measured speed), hence on a loaded
machine more than ``concurrency`` answers can be lost to a kill. The bound that must hold
is on the requests the server had NOT finished answering: at most ``concurrency``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from validate.store import ResultsStore

HERE = Path(__file__).parent
SCRIPT = HERE / "store_engine_writer_process.py"
PLAN = "plan-engine-resume"


def _runner(db: Path, server, n: int, concurrency: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(SCRIPT), str(db), server.base_url, str(n),
                             str(concurrency)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_engine_run_killed_and_resumed_never_recomputes(tmp_path, fake_openai):
    db, n, concurrency = tmp_path / "results.sqlite", 40, 4
    proc = _runner(db, fake_openai, n, concurrency)
    printed = []
    for line in proc.stdout:  # bounded: at most n lines
        printed.append(line.split()[1])
        if len(printed) == 8:
            os.kill(proc.pid, signal.SIGKILL)
            break
    rest, _ = proc.communicate(timeout=60)
    printed += [line.split()[1] for line in rest.splitlines() if line.startswith("stored")]
    assert proc.returncode == -signal.SIGKILL
    answered_before_kill = dict(fake_openai.state.answered)

    with ResultsStore.open(db) as store:
        stored = {s.key.item_id for s in store.responses(PLAN)}
    assert set(printed) <= stored and len(stored) < n
    proc = _runner(db, fake_openai, n, concurrency)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    with ResultsStore.open(db) as store:
        final = store.responses(PLAN)
    assert sorted(s.key.item_id for s in final) == [f"r{i:03d}" for i in range(n)]
    lost = []
    for s in final:
        calls = fake_openai.state.calls[s.request.prompt]
        if s.key.item_id in stored:
            assert calls == 1, f"{s.key.item_id} was stored yet requested again"
        else:
            assert calls in (1, 2)
            lost += [s.request.prompt] if calls == 2 else []
        assert s.record.timings.ttft_s < s.record.timings.e2e_s
    # sent by the killed run and never stored: answered and queued, or in flight
    in_flight = [prompt for prompt in lost if not answered_before_kill.get(prompt)]
    assert len(in_flight) <= concurrency, (lost, in_flight)
