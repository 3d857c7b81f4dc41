"""Launch, health-check and stop a model server running as a child process.

Shared by engines that own their server (vLLM today, SGLang later). Three things make
this harder than ``Popen`` + ``kill``:

- A server spawns workers (vLLM: API server -> EngineCore -> Worker + a resource
  tracker). Killing the root alone orphans them, and they keep gigabytes of RAM. So the
  server starts in its own session (``start_new_session=True``: its pid is also its
  process group and session id) and stopping signals the whole group, escalating from
  SIGTERM to SIGKILL after a grace period, until no process of the session is left.
- A server that dies while loading (bad flag, missing model, out of memory) must be
  reported at once with the reason from its log, not after the startup timeout.
- The log is evidence: it is written to a file that outlives the process, and its path
  is kept with the run.
- The launcher itself may be killed (kill -9 of a plan runner, which then resumes). The
  server runs under a small guard (``server_lifeline.py``) that notices its launcher's
  death through a pipe and takes the session down, so no server outlives its run.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_ERRORISH = re.compile(r"error|exception|traceback|killed|fatal", re.IGNORECASE)
LAUNCH_HEADER = "# v41val launch: "


class ServerStartError(OSError):
    """The server did not become healthy; the message quotes the end of its log."""


class ServerExitedEarly(ServerStartError):
    """The server process ended before its health endpoint answered."""


class ServerStartTimeout(ServerStartError):
    """The health endpoint did not answer 200 within the startup timeout."""


@dataclass(frozen=True)
class ServerCommand:
    """One server launch: what to run and how long to wait for it.

    ``health_url`` must answer HTTP 200 once the server takes requests. ``log_path``
    receives stdout and stderr together. ``env`` is laid over this process's environment
    (a None value removes the variable). ``stop_grace_s`` is how long a SIGTERM may take
    before the group is killed.
    """

    name: str
    argv: tuple[str, ...]
    health_url: str
    log_path: Path
    env: Mapping[str, str | None] = field(default_factory=dict)
    startup_timeout_s: float = 600.0
    stop_grace_s: float = 30.0
    poll_s: float = 0.25


def free_loopback_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now (the OS picks it). Another process
    could take it before the server binds; the server then dies early and says so."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def log_tail(path: Path, max_lines: int = 3, max_chars: int = 600) -> str:
    """The end of a log as one line: its last error-looking lines if there are any
    (argparse and tracebacks end with the line that explains), else its last lines."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError as exc:
        return f"(log unreadable: {exc.strerror})"
    lines = [" ".join(ANSI_ESCAPE.sub("", line).split()) for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith(LAUNCH_HEADER)][-40:]
    if not lines:
        return "(log is empty)"
    errorish = [line for line in lines if _ERRORISH.search(line)]
    chosen = (errorish or lines)[-max_lines:]
    quoted = " | ".join(chosen)
    return quoted if len(quoted) <= max_chars else "..." + quoted[-max_chars:]


def session_members(sid: int) -> list[int]:
    """Live (non-zombie) pids whose session id is ``sid``, read from /proc. Workers that
    a server forked stay in its session even after the root has exited."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode("ascii", errors="replace")
        except OSError:  # the process ended while we looked
            continue
        # pid (comm) state ppid pgrp session ...; comm may contain spaces and parens
        fields = stat[stat.rindex(")") + 2:].split()
        state, session = fields[0], int(fields[3])
        if session == sid and state not in ("Z", "X"):
            members.append(int(entry))
    return members


class ServerProcess:
    """A running server child: ``start()``, ``wait_healthy()``, ``stop()``.

    Use as a context manager (``with ServerProcess(cmd) as server:``) so the group is
    stopped even when the caller fails.
    """

    def __init__(self, command: ServerCommand) -> None:
        self.command = command
        self.process: subprocess.Popen | None = None
        self.startup_s: float | None = None
        self.exit_code: int | None = None
        self._started_at = 0.0
        self._stopped = False
        self._lifeline: int | None = None  # write end of the guard's pipe, never written

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    @property
    def stopped(self) -> bool:
        return self._stopped

    def start(self) -> ServerProcess:
        """Spawn the server in a new session, output to the log file; returns at once."""
        if self.process is not None:
            raise RuntimeError(f"{self.command.name} server already started")
        c = self.command
        c.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        for key, value in c.env.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        if shutil.which(c.argv[0], path=env.get("PATH")) is None:
            raise ServerStartError(f"{c.name}: cannot run {c.argv[0]!r}: not found or not "
                                   f"executable")
        guard = [sys.executable, str(Path(__file__).with_name("server_lifeline.py"))]
        read_end, write_end = os.pipe()  # both non-inheritable unless passed explicitly
        with open(c.log_path, "ab") as log:
            log.write(f"{LAUNCH_HEADER}{subprocess.list2cmdline(c.argv)}\n".encode())
            log.flush()
            self._started_at = time.monotonic()
            try:
                self.process = subprocess.Popen(
                    [*guard, str(read_end), str(c.stop_grace_s), *c.argv],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                    start_new_session=True, pass_fds=(read_end,))
            except OSError as exc:
                os.close(write_end)
                raise ServerStartError(f"{c.name}: cannot run {c.argv[0]!r}: "
                                       f"{exc.strerror or exc}") from exc
            finally:
                os.close(read_end)
        self._lifeline = write_end
        return self

    def wait_healthy(self) -> float:
        """Poll the health endpoint until it answers 200; return the seconds since
        launch. Raises (after stopping whatever is left) if the process ends first or
        the timeout passes; the message quotes the log's tail."""
        c = self.command
        assert self.process is not None, "start() first"
        deadline = self._started_at + c.startup_timeout_s
        with httpx.Client(timeout=httpx.Timeout(5.0, connect=1.0), trust_env=False) as http:
            while True:
                code = self.process.poll()
                if code is not None:
                    self.stop()
                    raise ServerExitedEarly(
                        f"{c.name} server exited with code {code} before {c.health_url} "
                        f"answered; log {c.log_path}: {log_tail(c.log_path)}")
                if _answers_200(http, c.health_url):
                    self.startup_s = time.monotonic() - self._started_at
                    return self.startup_s
                if time.monotonic() >= deadline:
                    self.stop()
                    raise ServerStartTimeout(
                        f"{c.name} server did not answer {c.health_url} within "
                        f"{c.startup_timeout_s:g} s; log {c.log_path}: {log_tail(c.log_path)}")
                # the wait doubles as the poll interval and an early-exit detector
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=c.poll_s)

    def stop(self) -> int | None:
        """Stop the whole session: SIGTERM to the group, wait up to the grace period for
        every member to end, then SIGKILL the group. Returns the root's exit code.
        Idempotent."""
        if self.process is None or self._stopped:
            return self.exit_code
        sid = self.process.pid
        grace = self.command.stop_grace_s
        _signal_group(sid, signal.SIGTERM)
        if not self._wait_session_gone(sid, grace):
            _signal_group(sid, signal.SIGKILL)
            self._wait_session_gone(sid, 10.0)
        try:
            self.exit_code = self.process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:  # cannot happen after SIGKILL; be explicit
            self.exit_code = None
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None
        self._stopped = True
        return self.exit_code

    def _wait_session_gone(self, sid: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is None:  # reap the root as soon as it ends
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=0.05)
            if self.process.poll() is not None and not session_members(sid):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


def _answers_200(http: httpx.Client, url: str) -> bool:
    try:
        return http.get(url).status_code == 200
    except httpx.HTTPError:
        return False


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)
