"""Paths the user names for v41val to write into (``--workspace``, a checkpoint folder,
``--markdown``): checked before any work, so an existing regular file where a folder
is expected, a folder that cannot be created, or a directory where a file is expected
is one input error naming the flag and the path, not an ``OSError`` traceback after
minutes of work."""

from __future__ import annotations

import os
from pathlib import Path

from runtime.paths import make_directory
from validate.errors import ValidateInputError


def ensure_directory(path: str | Path, flag: str) -> Path:
    """``path`` as an existing, writable directory (created with its parents)."""
    path = make_directory(path, ValidateInputError, f"{flag} {path}")
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValidateInputError(f"{flag} {path}: the directory is not writable")
    return path


def check_output_file(path: str | Path, flag: str) -> Path:
    """``path`` as a file v41val may write: not a directory, and no parent that is a
    regular file (the parent folders are created when it is written)."""
    path = Path(path)
    if path.is_dir():
        raise ValidateInputError(f"{flag} {path}: is a directory (expected a file name)")
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValidateInputError(f"{flag} {path}: {parent} is not a directory")
            break
    return path


def write_text_file(path: str | Path, text: str, flag: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` (checked by ``check_output_file``; missing
    parent folders made); an OS refusal is one input error naming the flag."""
    path = check_output_file(path, flag)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ValidateInputError(f"{flag} {path}: cannot write ({exc.strerror or exc})") \
            from None
    return path
