"""Which torch device a user's ``device`` setting names, checked before any work:
``cpu``, ``cuda`` or ``cuda:N``. A CUDA device on a machine (or a torch build) without
CUDA, or an index past the devices present, is a ``ConfigError`` naming the setting and
what this machine has, instead of torch's ``AssertionError: Torch not compiled with
CUDA enabled`` from deep inside the first tensor that moves."""

from __future__ import annotations

import re

from runtime.errors import ConfigError

_FORM = re.compile(r"^(cpu|cuda)(?::(\d+))?$")


def check_device(text: object, field: str = "device") -> str:
    """``text`` when this machine has that device; else a one-line ``ConfigError``."""
    match = _FORM.match(text) if isinstance(text, str) else None
    if match is None or (match.group(1) == "cpu" and match.group(2) is not None):
        raise ConfigError(f"{field}: expected cpu, cuda or cuda:N, got {text!r}")
    if match.group(1) == "cpu":
        return text
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise ConfigError(f"{field}: {text!r} needs a CUDA device, but this machine has none "
                          f"(torch {torch.__version__}, torch.cuda.is_available() is False); "
                          f"use cpu")
    index = int(match.group(2) or 0)
    if index >= count:
        raise ConfigError(f"{field}: {text!r} names CUDA device {index}, but this machine has "
                          f"{count} (cuda:0..cuda:{count - 1})")
    return text
