"""Ctrl-C during long work: the first one stops it cleanly, a second one cannot crash it.

The first SIGINT raises ``KeyboardInterrupt`` in the main thread, as Python's own
handler does; the work unwinds through its ``finally`` blocks: the builtin engine's
worker abandons its batch before the next model step, ``run_plan`` marks the run
"interrupted" in the store, and the command exits 130. Unwinding takes one engine
step, which is the "within a few seconds" the command line promises.

A second SIGINT while that happens used to raise again inside the cleanup, leave the
engine's worker thread running torch while the interpreter shut down, and end in
"terminate called without an active exception" (SIGABRT, exit 134). Here it exits at
once with ``os._exit(130)``, which runs no interpreter teardown, so no C++ destructor
meets a live thread. Every stored response was committed when it arrived, so nothing
stored is lost; the run then stays "running" in the store, and a rerun resumes it all
the same.

A process that inherited SIGINT ignored (``cmd &`` in a non-interactive shell) keeps
ignoring it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator

from validate.decisions import EXIT_INTERRUPTED

FIRST = "interrupted: stopping after the engine's current step (Ctrl-C again to exit at once)"
SECOND = "interrupted again: exiting now (stored responses are kept; a rerun resumes)"


@contextlib.contextmanager
def stop_on_interrupt(say: Callable[[str], None]) -> Iterator[None]:
    """Inside the block, SIGINT behaves as the module doc says; ``say`` writes one line
    (the command line's stderr). Outside the main thread, or with SIGINT ignored, it
    changes nothing."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is signal.SIG_IGN):
        yield
        return
    seen = []

    def handler(signum, frame) -> None:
        seen.append(signum)
        if len(seen) == 1:
            say(FIRST)
            raise KeyboardInterrupt
        say(SECOND)
        os._exit(EXIT_INTERRUPTED)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
