"""Read a text file the user named (plan, policy, lm-eval samples, a fidelity file) as
UTF-8, with one-line input errors: a missing or unreadable file, a directory, or bytes
that are not UTF-8 all become ``error("<file>: ...")`` naming the file and what was
expected, never a builtin exception the CLI would report as an internal error."""

from __future__ import annotations

from pathlib import Path


def read_text(path: str | Path, error: type[Exception], what: str) -> str:
    """The text of ``path`` (``what``: e.g. "plan file", for the message)."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: cannot read {what}: expected UTF-8 text, found byte "
                    f"0x{exc.object[exc.start]:02x} at offset {exc.start}") from None
    except OSError as exc:
        raise error(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
