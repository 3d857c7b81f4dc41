"""What every benchmark result file states about where it was measured, and how it is
written: one JSON document and a Markdown note beside it, both under
``benchmarks/results`` (shared by the A/A speed benchmarks)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import sys
from pathlib import Path

import torch


def environment(load_before: float) -> dict:
    return {"python": platform.python_version(), "torch": torch.__version__,
            "platform": platform.platform(), "processor": platform.machine(),
            "cpu_count": os.cpu_count(), "load_before": round(load_before, 2)}


def gpu_tag(name: str) -> str:
    """The GPU in result file names: its model word, lower case ("NVIDIA H200" -> h200,
    "NVIDIA H100 80GB HBM3" -> h100, "NVIDIA A100-SXM4-80GB" -> a100), else the name's last
    word (the memory type would name an H100's files hbm3)."""
    words = [w for w in re.split(r"[\s-]+", name.strip()) if w]
    for word in words:
        if word.upper() != "NVIDIA" and re.fullmatch(r"[A-Za-z]+\d+[A-Za-z]?", word):
            return word.lower()
    return words[-1].lower() if words else "gpu"


def command_line(script: str, argv: list[str]) -> str:
    """How to run it again, as recorded in a result file: quoted the way a shell needs it
    (``--only`` labels hold spaces)."""
    return "PYTHONPATH=. python " + shlex.join([script, *argv])


def header(title: str, doc: dict) -> list[str]:
    """The note's title, command and hardware lines."""
    env = doc["environment"]
    return [f"# {title}", "", f"Command: `{doc['command']}`", "",
            f"Hardware: {env['processor']}, {env['cpu_count']} CPUs; {env['platform']}; "
            f"Python {env['python']}, torch {env['torch']}; load average before "
            f"{env['load_before']}", ""]


def write(out: Path, stem: str, doc: dict, note: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / f"{stem}.md").write_text(note)
    print(note)


def seeded_cpu_main(script: str, stem: str, description: str, measure, markdown, argv: list[str] | None) -> int:
    """The command line of a CPU emulation drawn over ``--seeds`` independent seeds
    (benchmarks/tf32_accumulation.py, benchmarks/fma_mixing.py): ``measure(seed)`` gives
    its rows, ``markdown(doc)`` its note; written as ``stem``.json / .md under ``--out``.
    A bad ``--seeds`` is one line on stderr and exit status 2."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--seeds", type=int, default=3, help="independent draws (default 3)")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        print(f"{script}: --seeds: expected >= 1, got {args.seeds}", file=sys.stderr)
        return 2
    rows = [{"seed": seed, **row} for seed in range(args.seeds) for row in measure(seed)]
    doc = {"environment": environment(os.getloadavg()[0]),
           "command": command_line(script, argv if argv is not None else sys.argv[1:]),
           "seeds": args.seeds, "rows": rows}
    write(args.out, stem, doc, markdown(doc))
    return 0
