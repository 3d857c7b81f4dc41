"""ServerProcess (the generic launch / health / stop of a server child) against real child
processes: a loopback HTTP server whose grandchild ignores SIGTERM, a process that dies
while "loading", one that never answers. Process liveness is checked with ``ps``, not
with the module's own /proc reader."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest

from validate.engines.server_process import (
    ServerCommand,
    ServerExitedEarly,
    ServerProcess,
    ServerStartError,
    ServerStartTimeout,
    free_loopback_port,
    log_tail,
)

# A server that forks a grandchild ignoring SIGTERM (like a worker stuck in a kernel),
# writes the grandchild's pid to a file, then serves /health on loopback.
SERVER = textwrap.dedent("""
    import http.server, os, signal, sys, time
    port, pid_file = int(sys.argv[1]), sys.argv[2]
    child = os.fork()
    if child == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(1)
    with open(pid_file, "w") as fh:
        fh.write(str(child))
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()
        def log_message(self, *args):
            pass
    print("serving on", port, flush=True)
    http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
""")


def _alive_in_session(sid: int) -> list[str]:
    """Non-zombie processes of session ``sid`` according to ps."""
    out = subprocess.run(["ps", "-s", str(sid), "-o", "pid=,stat="], capture_output=True,
                         text=True).stdout
    return [line for line in out.splitlines() if line.split() and
            not line.split()[1].startswith("Z")]


def _alive(pid: int) -> bool:
    out = subprocess.run(["ps", "-p", str(pid), "-o", "stat="], capture_output=True,
                         text=True).stdout.strip()
    return bool(out) and not out.startswith("Z")


def _command(tmp_path: Path, argv, **overrides) -> ServerCommand:
    port = overrides.pop("port", free_loopback_port())
    settings = dict(name="toy", argv=tuple(argv), health_url=f"http://127.0.0.1:{port}/health",
                    log_path=tmp_path / "logs" / "toy.log", startup_timeout_s=30.0,
                    stop_grace_s=1.0, poll_s=0.05)
    settings.update(overrides)
    return ServerCommand(**settings)


def test_healthy_server_then_stop_kills_the_whole_session(tmp_path):
    port = free_loopback_port()
    pid_file = tmp_path / "grandchild.pid"
    cmd = _command(tmp_path, [sys.executable, "-c", SERVER, str(port), str(pid_file)],
                   port=port)
    with ServerProcess(cmd).start() as server:
        startup = server.wait_healthy()
        assert 0 < startup < 30
        assert httpx.get(cmd.health_url, trust_env=False).status_code == 200
        sid = server.pid
        grandchild = int(pid_file.read_text())
        # the lifeline guard, the server and its SIGTERM-proof grandchild
        assert len(_alive_in_session(sid)) == 3 and _alive(grandchild)
    # the grandchild ignored SIGTERM: only the SIGKILL fallback can have ended it
    assert not _alive(grandchild)
    assert _alive_in_session(sid) == []
    assert server.exit_code is not None
    log = cmd.log_path.read_text()
    assert log.startswith("# v41val launch: ") and f"serving on {port}" in log
    assert server.stop() == server.exit_code  # idempotent


def test_process_dying_while_loading_is_reported_at_once_with_its_log_tail(tmp_path):
    script = ("import sys; print('loading weights', flush=True); "
              "sys.stderr.write('ValueError: unknown flag --frobnicate\\n'); sys.exit(3)")
    cmd = _command(tmp_path, [sys.executable, "-c", script], startup_timeout_s=600.0)
    server = ServerProcess(cmd).start()
    with pytest.raises(ServerExitedEarly) as err:
        server.wait_healthy()
    message = str(err.value)
    assert "\n" not in message
    assert "exited with code 3" in message and str(cmd.log_path) in message
    assert message.endswith("ValueError: unknown flag --frobnicate")
    assert _alive_in_session(server.pid) == []


def test_server_that_never_answers_times_out_and_is_stopped(tmp_path):
    script = "import time; print('still loading', flush=True); time.sleep(120)"
    cmd = _command(tmp_path, [sys.executable, "-c", script], startup_timeout_s=0.5)
    server = ServerProcess(cmd).start()
    with pytest.raises(ServerStartTimeout, match=r"did not answer .*/health within 0.5 s; "
                                                 r"log .*: still loading$"):
        server.wait_healthy()
    assert _alive_in_session(server.pid) == []


LAUNCHER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from validate.engines.server_process import ServerCommand, ServerProcess
    port, pid_file, log = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    server = ServerProcess(ServerCommand(
        name="toy", argv=(sys.executable, "-c", sys.argv[4], str(port), pid_file),
        health_url=f"http://127.0.0.1:{port}/health", log_path=log, stop_grace_s=1.0,
        poll_s=0.05)).start()
    server.wait_healthy()
    print(server.pid, flush=True)
    time.sleep(600)  # until the test kills this launcher with SIGKILL
""")


def test_server_does_not_outlive_a_launcher_killed_with_sigkill(tmp_path):
    port = free_loopback_port()
    pid_file = tmp_path / "grandchild.pid"
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(port), str(pid_file), str(tmp_path / "toy.log"),
         SERVER], stdout=subprocess.PIPE, text=True)
    try:
        sid = int(launcher.stdout.readline())
        grandchild = int(pid_file.read_text())
        assert len(_alive_in_session(sid)) == 3  # guard, server, SIGTERM-proof grandchild
    finally:
        launcher.kill()
        launcher.wait()
    deadline = time.monotonic() + 20
    while _alive_in_session(sid) and time.monotonic() < deadline:
        time.sleep(0.1)  # polling for the guard's clean-up, bounded by the deadline
    assert _alive_in_session(sid) == []
    assert not _alive(grandchild)


def test_missing_executable_is_a_start_error(tmp_path):
    cmd = _command(tmp_path, [str(tmp_path / "no-such-server")])
    with pytest.raises(ServerStartError, match="toy: cannot run .*no-such-server.: not found"):
        ServerProcess(cmd).start()


def test_log_tail_prefers_error_lines_strips_colour_and_is_one_line(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("INFO starting\n\x1b[31mERROR\x1b[0m  first   problem\nINFO more\n"
                   "usage: serve [-h]\nserve: error: unrecognized arguments: --bad\n\n")
    assert log_tail(log) == ("ERROR first problem | serve: error: unrecognized arguments: "
                             "--bad")
    log.write_text("one\ntwo\nthree\nfour\n")
    assert log_tail(log) == "two | three | four"
    log.write_text("")
    assert log_tail(log) == "(log is empty)"
    assert log_tail(tmp_path / "missing.log").startswith("(log unreadable")
    log.write_text("error " + "x" * 2000 + "\n")
    tail = log_tail(log, max_chars=100)
    assert len(tail) == 103 and tail.startswith("...")
