"""Read a TOML file (plans, gate policies) into a dict, with one-line input errors.

``error`` is the caller's input-error class (``PlanError``, ``PolicyError``), so the
CLI reports "<file>: cannot read ..." / "<file>: not valid TOML: ..." and exits 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

from validate.textfile import read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def read_toml(path: str | Path, error: type[Exception], what: str) -> dict:
    """The parsed document of ``path`` (``what``: e.g. "plan file", for the message)."""
    path = Path(path)
    text = read_text(path, error, what)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML: {exc}") from None
