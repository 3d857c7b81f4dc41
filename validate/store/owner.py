"""Which process owns a run, so a run whose process died without finishing (``kill
-9``, an out-of-memory kill, a machine that lost power) does not read as ``running``
forever.

``begin_run`` keeps the owner beside the run's environment identity (``identity_json``,
key ``owner``: pid, host, and the process's start time from ``/proc``, which tells a
reused pid from the original). A reader sees such a run as ``interrupted`` when the
owner ran on this host and that process is gone; the next ``v41val run`` on the store
writes that status (``ResultsStore.settle_abandoned``), and the same command resumes
it like any interrupted run. A run owned by another host cannot be checked from here
and keeps the status it has.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path

OWNER_KEY = "owner"
PROC = Path("/proc")


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks after boot (/proc/<pid>/stat field 22)."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    try:
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None


def this_process() -> dict:
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "process_start": _start_time(pid)}


def is_gone(owner: Mapping | None) -> bool:
    """True when ``owner`` ran on this host and its process no longer exists (or its pid
    now belongs to another process); False when it lives or cannot be checked here."""
    if not isinstance(owner, Mapping) or owner.get("host") != socket.gethostname():
        return False
    pid = owner.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if (PROC / "self" / "stat").exists():
        started = _start_time(pid)
        if started is None:
            return True
        recorded = owner.get("process_start")
        return isinstance(recorded, int) and started != recorded
    try:  # no /proc: ask the kernel whether the pid exists
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False
