"""A folder the user named for v41val to write into, made (with its parents) or refused
in one line: an existing regular file there, or a path that cannot be created, is
``error(...)`` naming it instead of an ``OSError`` traceback. The runtime writes
checkpoints into one; ``validate.userpaths`` uses it for workspaces and stores."""

from __future__ import annotations

from pathlib import Path


def make_directory(path: str | Path, error: type[Exception], what: str) -> Path:
    """``path`` as an existing directory; ``what`` names it ("--workspace x", ...)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise error(f"{what}: exists and is not a directory (expected a directory to write "
                    f"into)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise error(f"{what}: cannot create the directory ({exc.strerror or exc})") from None
    return path
