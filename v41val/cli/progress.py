"""How the command line shows ``validate.progress``: rich bars with an ETA on stderr.

Only when stderr is a terminal and the command was not asked for ``--json``: a log
file or a pipe gets no control codes, and stdout stays the one JSON document. A bar
lives while its phase runs (the library opens and closes it) and the whole display is
transient, so the report that follows starts on a clean screen.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from v41val.cli.common import stderr_console


class _Bar:
    def __init__(self, progress: Progress, task) -> None:
        self.progress, self.task = progress, task

    def advance(self, n: float = 1) -> None:
        self.progress.advance(self.task, n)

    def update(self, done: float) -> None:
        self.progress.update(self.task, completed=done)


class RichProgress:
    """``validate.progress.Progress`` on a rich ``Progress`` (thread-safe: rich locks)."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    @contextlib.contextmanager
    def bar(self, label: str, total: float | None) -> Iterator[_Bar]:
        task = self.progress.add_task(label, total=total)
        try:
            yield _Bar(self.progress, task)
        finally:
            self.progress.remove_task(task)


@contextlib.contextmanager
def shown_progress(as_json: bool = False):
    """The ``Progress`` a command passes down: rich bars, or ``QUIET`` (see module doc)."""
    from validate.progress import QUIET

    console = stderr_console()
    if as_json or not console.is_terminal:
        yield QUIET
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("eta"),
               TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        yield RichProgress(progress)
