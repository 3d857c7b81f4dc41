"""The H200 checklist's sweep commands parse: every ``benchmarks/attention_tiles.py`` line
of benchmarks/h200_checklist.sh (loop variables set to one value; lines with other shell
variables left out) is accepted by the script's own argument parser, so a device session
does not lose a call to a misspelled flag. Off the GPU the script stops right after parsing, with its one-line "needs a CUDA
GPU" (a flag it refuses is another message, exit 2 too)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

CHECKLIST = Path(__file__).resolve().parents[2] / "benchmarks" / "h200_checklist.sh"


LOOP_VALUES = {"$run": "1", "$sc": "mid"}  # the checklist's loop variables, one value each


def sweep_lines() -> list[str]:
    lines = []
    for line in CHECKLIST.read_text().splitlines():
        match = re.search(r"python benchmarks/attention_tiles\.py (.*?)(?: >|$)", line)
        if not match:
            continue
        args = match.group(1)
        for name, value in LOOP_VALUES.items():
            args = args.replace(name, value)
        if "$" not in args.replace("$R/", ""):  # $R: the results folder
            lines.append(args)
    return lines


def test_the_checklist_has_sweep_lines():
    assert len(sweep_lines()) >= 5


@pytest.mark.parametrize("args", sweep_lines())
def test_each_sweep_line_parses(args, tmp_path, capsys, monkeypatch):
    import torch

    from benchmarks.attention_tiles import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    argv = shlex.split(args.replace("$R/", f"{tmp_path}/"))
    assert main(argv) == 2
    assert capsys.readouterr().err == "benchmarks/attention_tiles.py: needs a CUDA GPU\n"
