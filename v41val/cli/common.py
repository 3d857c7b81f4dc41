"""CLI conventions shared by every ``v41val`` command.

- People get rich output on stdout; machines pass ``--json`` and get exactly one JSON
  document on stdout and nothing else (progress and warnings go to stderr).
- Exit 0 on success, 2 on bad usage or input with a one-line message on stderr
  (``v41val: error: ...``); a traceback only with ``v41val --debug ...``. Gate
  commands add 1 (NO-GO), 3 (INCONCLUSIVE) and 4 (INVALID).
- Ctrl-C: the first stops the work within an engine step and exits 130 with one line
  on stderr (a run's store marks it interrupted; rerunning resumes it); a second exits
  at once (``validate.interrupt``).

Errors count as "bad input" when their class is defined inside one of v41val's own
packages and derives from ValueError/LookupError/OSError: every package declares
its own input errors (``tasks.errors``, ``runtime.errors``, ``validate.errors``)
without importing the CLI, and a bug that raises a builtin exception still shows
its traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from rich.console import Console

from validate.decisions import (  # noqa: F401  (the codes, defined once)
    EXIT_INCONCLUSIVE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_INVALID,
    EXIT_NO_GO,
    EXIT_OK,
    EXIT_USAGE,
)

OWN_PACKAGES = ("runtime", "tasks", "validate", "reports", "training", "v41val")


def stdout_console() -> Console:
    return Console(highlight=False)


def stderr_console() -> Console:
    return Console(stderr=True, highlight=False)


def is_user_error(exc: BaseException) -> bool:
    """True when ``exc`` is one of our own declared input errors (see module doc)."""
    if not isinstance(exc, (ValueError, LookupError, OSError)):
        return False
    return type(exc).__module__.split(".")[0] in OWN_PACKAGES


def one_line(message: str) -> str:
    return " ".join(str(message).split())


def notice(message: str) -> None:
    """One ``v41val: <message>`` line on stderr, flushed (Ctrl-C notices)."""
    sys.stderr.write(f"v41val: {one_line(message)}\n")
    sys.stderr.flush()


def fail(message: str, code: int = EXIT_USAGE) -> None:
    """Print ``v41val: error: <message>`` on one line to stderr and exit."""
    sys.stderr.write(f"v41val: error: {one_line(message)}\n")
    raise SystemExit(code)


def emit(as_json: bool, document: Any, render: Callable[[Console], None]) -> None:
    """Write ``document`` as one JSON document, or call ``render`` for people."""
    if as_json:
        sys.stdout.write(json.dumps(document, indent=2, sort_keys=False, default=str))
        sys.stdout.write("\n")
    else:
        render(stdout_console())
