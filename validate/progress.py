"""Progress of long work, as the library reports it; a front end decides how to show it.

Every phase that can take more than a few seconds (priming a variant, its quality
pass, its speed sweep, the fidelity pass, calibration, building a report) opens a
``Bar`` on the ``Progress`` it was handed, with its total known from the start, and
moves it as work completes. The library never draws and never reads a global: the
command line passes a rich implementation (``v41val/cli/progress.py``: bars with an
ETA on stderr, only on a terminal and never with ``--json``) or ``QUIET``; tests pass
a ``Recorder``. Bars may move from a worker thread (the builtin engine primes and
serves there), so implementations must be thread-safe.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol


class Bar(Protocol):
    def advance(self, n: float = 1) -> None:
        """``n`` more units are done."""

    def update(self, done: float) -> None:
        """``done`` units are done in all (a fraction of a unit is allowed)."""


class Progress(Protocol):
    def bar(self, label: str, total: float | None) -> contextlib.AbstractContextManager[Bar]:
        """A bar for one phase, shown while the context is open (``total`` None: unknown)."""


class _NoBar:
    def advance(self, n: float = 1) -> None:
        return None

    def update(self, done: float) -> None:
        return None


class Quiet:
    """Shows nothing (the default of every library call)."""

    @contextlib.contextmanager
    def bar(self, label: str, total: float | None) -> Iterator[Bar]:
        yield _NoBar()


QUIET = Quiet()


@dataclass(frozen=True)
class Event:
    """What a ``Recorder`` saw: a bar opened ("open", done 0), moved ("move") or closed."""

    kind: str
    label: str
    done: float
    total: float | None


class _RecordedBar:
    def __init__(self, recorder: Recorder, label: str, total: float | None) -> None:
        self.recorder, self.label, self.total, self.done = recorder, label, total, 0.0

    def advance(self, n: float = 1) -> None:
        self.update(self.done + n)

    def update(self, done: float) -> None:
        self.done = done
        self.recorder.add(Event("move", self.label, done, self.total))


class Recorder:
    """Keeps every event, in order (tests; a log)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()

    def add(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)
        self.seen(event)

    def seen(self, event: Event) -> None:
        """Called after each event is kept (a test may raise here to stop the work)."""

    @contextlib.contextmanager
    def bar(self, label: str, total: float | None) -> Iterator[Bar]:
        bar = _RecordedBar(self, label, total)
        self.add(Event("open", label, 0.0, total))
        try:
            yield bar
        finally:
            self.add(Event("close", label, bar.done, total))

    def labels(self) -> list[str]:
        """Bar labels in the order they opened."""
        return [e.label for e in self.events if e.kind == "open"]

    def final(self, label: str) -> tuple[float, float | None]:
        """(done, total) of the bar ``label`` when it closed."""
        closes = [e for e in self.events if e.kind == "close" and e.label == label]
        return (closes[-1].done, closes[-1].total)
