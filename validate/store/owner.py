"""Which process owns a run, so a run whose process died without finishing (``kill
-9``, an out-of-memory kill, a machine that lost power) does not read as ``running``
forever.

``begin_run`` keeps the owner beside the run's environment identity (``identity_json``,
key ``owner``): the pid, the host name, the process's start time from ``/proc`` (which
tells a reused pid from the original), the kernel's boot id and the pid namespace. A
reader sees such a run as ``interrupted`` only when the owner ran in this very pid
space and that process is gone; the next ``v41val run`` on the store writes that
status (``ResultsStore.settle_abandoned``), and the same command resumes it like any
interrupted run.

A pid means something only on the kernel and in the pid namespace that gave it out,
and a host name does not pin those down: containers on different machines often share
one (``localhost``, an image's fixed name), and containers on one machine share the
kernel but not the pid namespace. So a run whose recorded host name, boot id or pid
namespace differs from this process's is never checked here and keeps the status it
has, whatever pid it names (a store on a shared disk, written by a run on another
machine, stays ``running`` while that run lives). A machine that rebooted has a new
boot id, so its own runs from before the reboot are left alone too: which of the two it
is cannot be told from here. Owners recorded before the boot id and namespace were
kept are checked by host name alone, as they were.
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


def _read(path: Path, link: bool = False) -> str | None:
    try:
        return os.readlink(path) if link else path.read_text().strip()
    except OSError:
        return None


def _pid_space() -> dict:
    """Where this process's pids mean something: the kernel's boot id and the pid
    namespace (None where /proc does not say)."""
    return {"boot_id": _read(PROC / "sys" / "kernel" / "random" / "boot_id"),
            "pid_namespace": _read(PROC / "self" / "ns" / "pid", link=True)}


def this_process() -> dict:
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "process_start": _start_time(pid),
            **_pid_space()}


def _same_pid_space(owner: Mapping) -> bool:
    """The owner's pid can be checked here: same host name and, where the owner recorded
    them, the same boot id and pid namespace (module doc)."""
    if owner.get("host") != socket.gethostname():
        return False
    here = _pid_space()
    return all(owner[key] == here[key] for key in here if key in owner)


def is_gone(owner: Mapping | None) -> bool:
    """True when ``owner`` ran in this pid space (``_same_pid_space``) and its process no
    longer exists (or its pid now belongs to another process); False when it lives or
    cannot be checked here."""
    if not isinstance(owner, Mapping) or not _same_pid_space(owner):
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
