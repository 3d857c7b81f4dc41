"""Run a server as the child of this small guard so it cannot outlive its launcher.

``python server_lifeline.py LIFELINE_FD GRACE_S ARGV...`` starts ARGV and waits. The
launcher holds the write end of a pipe whose read end is LIFELINE_FD and never writes
to it; when the launcher dies in any way (kill -9 included), the kernel closes that end,
this guard reads EOF and takes the whole session down: SIGTERM, then SIGKILL after
GRACE_S. Without it a killed plan runner would leave a vLLM server (and its GPU memory)
behind, and the resumed run would start a second one beside it.

The guard is the session leader that ``ServerProcess`` starts; it exits with the
server's exit code (128 + N for a signal N), so an early death reads as the server's.
A SIGTERM to the group reaches the server directly; the guard ignores it and waits.
Standard library only: it runs before, and independently of, the server's environment.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time


def exit_code(returncode: int) -> int:
    return returncode if returncode >= 0 else 128 - returncode


def take_session_down(child: subprocess.Popen, grace_s: float) -> None:
    os.killpg(0, signal.SIGTERM)  # the guard ignores it; everyone else gets it
    deadline = time.monotonic() + grace_s
    while child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(0, signal.SIGKILL)  # stragglers and workers, and this guard last


def main(argv: list[str]) -> int:
    lifeline, grace_s, command = int(argv[0]), float(argv[1]), argv[2:]
    child = subprocess.Popen(command)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # after the spawn: ignoring is inherited
    while True:
        ready, _, _ = select.select([lifeline], [], [], 0.1)
        if child.poll() is not None:
            return exit_code(child.returncode)
        if ready and not os.read(lifeline, 1):  # EOF: the launcher is gone
            take_session_down(child, grace_s)
            return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
