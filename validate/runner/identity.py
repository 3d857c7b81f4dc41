"""What a stored run records about where it ran: versions and git SHA
(``validate.identity``) plus the hardware, so a number can be traced to its machine."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def hardware() -> dict:
    """CPU model and count, memory, and the GPUs torch sees (only when torch is
    already imported: asking should not cost a CUDA initialisation)."""
    info: dict = {"cpu": _cpu_model(), "cpu_count": os.cpu_count()}
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        info["memory_gib"] = round(pages * size / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        info["memory_gib"] = None
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    else:
        info["gpus"] = []
    return info


def run_identity(engine_kind: str) -> dict:
    """The runner's environment and hardware. For a server engine (vllm, openai) the
    runner's own vLLM package says nothing about the server, so ``vllm`` starts unknown
    (None) and is filled in from what the servers report (``validate.runner.servers``)."""
    from validate.identity import environment_identity

    ident = {**environment_identity(), "hardware": hardware(), "engine": engine_kind}
    if engine_kind in ("vllm", "openai"):
        ident["vllm"] = None
    return ident
