"""Where reports are written: never outside the directory the user chose.

A report path comes from the command line, and in nightly jobs from templated strings
("reports/{plan}/{date}.html"); a plan name such as ``../../etc`` or an absolute path
must not let a job write elsewhere. ``safe_output_path`` resolves the path (following
symlinks that already exist) and refuses anything that does not stay inside ``root``.
"""

from __future__ import annotations

import os
from pathlib import Path

from reports.errors import OutputPathError
from validate.userpaths import check_output_file


def safe_output_path(path: str | os.PathLike, root: str | os.PathLike | None = None) -> Path:
    """``path`` resolved inside ``root`` (default: the current directory).

    Relative paths are taken relative to ``root``. Raises ``OutputPathError`` when the
    result would leave ``root`` (``..`` segments, an absolute path elsewhere, a symlink
    pointing out) or names the directory itself.
    """
    base = Path(root if root is not None else os.getcwd()).resolve()
    if base.exists() and not base.is_dir():
        raise OutputPathError(f"--out-dir {root}: is not a directory (expected the directory "
                              f"reports are written inside)")
    raw = Path(path)
    if str(path).strip() == "":
        raise OutputPathError("output path is empty")
    target = (raw if raw.is_absolute() else base / raw).resolve()
    if target == base or base not in target.parents:
        raise OutputPathError(
            f"output path {str(path)!r} resolves to {target}, outside the output directory {base}"
        )
    return check_output_file(target, "-o")


def write_text_safely(path: str | os.PathLike, text: str,
                      root: str | os.PathLike | None = None) -> Path:
    """Write ``text`` (UTF-8) to ``path`` checked by ``safe_output_path``; parents are
    created inside ``root``. The file is written next to its target and renamed, so a
    reader (a CI artifact upload, a web server) never sees half a report."""
    target = safe_output_path(path, root)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OutputPathError(f"-o {path}: cannot write {target} ({exc.strerror or exc})") \
            from None
    return target
