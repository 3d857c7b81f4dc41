"""Who and what produced a result: versions, hardware and source revision.

Recorded with every stored run so a number can be traced back to its setup.
Cheap on purpose (no torch import unless torch is already loaded or asked for).
"""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from pathlib import Path

TRACKED_PACKAGES = ("v41val", "torch", "triton", "lm-eval", "datasets", "scipy", "vllm")


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def git_revision(path: Path | None = None) -> str | None:
    """The git SHA of the checkout holding v41val (with ``-dirty``), or None."""
    where = path or Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{sha}-dirty" if dirty else sha


def environment_identity() -> dict[str, str | None]:
    ident: dict[str, str | None] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "git": git_revision(),
    }
    for name in TRACKED_PACKAGES:
        ident[name] = package_version(name)
    return ident
