"""A tiny harness around Debian's headless ``chromium``: load a local HTML file, collect
what the page wrote to its console, and take a screenshot.

Chromium logs every console message of the page (errors, uncaught exceptions, CSP
violations) to stderr as ``INFO:CONSOLE...] "<message>", source: ...`` when started
with ``--enable-logging=stderr --v=0``. Our pages have no script at all, so *any*
console line is a defect."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CONSOLE = re.compile(r":CONSOLE[:(\]]")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0", "--hide-scrollbars")


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass(frozen=True)
class PageLoad:
    console: tuple[str, ...]  # console lines the page produced
    screenshot: Path | None
    returncode: int


def load(html_path: Path, screenshot: Path | None = None, size=(1400, 2400),
         timeout_s: float = 90.0) -> PageLoad:
    binary = chromium_binary()
    if binary is None:
        raise FileNotFoundError("chromium is not installed")
    with tempfile.TemporaryDirectory(prefix="v41val-chromium-") as profile:
        args = [binary, *FLAGS, f"--user-data-dir={profile}",
                f"--window-size={size[0]},{size[1]}"]
        args += [f"--screenshot={screenshot}"] if screenshot is not None else ["--dump-dom"]
        args.append(html_path.resolve().as_uri())
        env = dict(os.environ, HOME=profile)
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s, env=env,
                              cwd=profile)
    lines = tuple(line for line in proc.stderr.splitlines() if CONSOLE.search(line))
    return PageLoad(lines, screenshot if screenshot and screenshot.exists() else None,
                    proc.returncode)


def pixels(png: Path) -> np.ndarray:
    """(H, W, C) floats in [0, 1]."""
    from matplotlib import image

    return np.asarray(image.imread(str(png)), dtype=np.float64)
