"""Every committed benchmark result is readable: each JSON under benchmarks/results parses
(an earlier hand edit had left unescaped quotes in fifteen of them) and has its Markdown
note beside it, which states the command that made it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
JSONS = sorted(RESULTS.glob("*.json"))


@pytest.mark.parametrize("path", JSONS, ids=[p.name for p in JSONS])
def test_result_json_parses(path):
    doc = json.loads(path.read_text())
    assert isinstance(doc, (dict, list)) and doc


def test_device_results_name_their_command():
    """The H200 results (the ones no CI can re-run) each carry the command in their note."""
    notes = [p for p in RESULTS.glob("*h200*.md")]
    assert notes
    for note in notes:
        assert re.search(r"`(PYTHONPATH=\. )?python \S*benchmarks/\w+\.py", note.read_text()), note.name


def test_a_recorded_command_splits_back_into_its_arguments():
    """A label with spaces (``--only 'two launches select w1'``) stays one argument, so the
    command a result file states runs the same variants again."""
    import shlex

    from benchmarks.records import command_line

    argv = ["--only", "new", "two launches select w1", "--rows", "1,8"]
    line = command_line("benchmarks/gate_tiles.py", argv)
    assert line.startswith("PYTHONPATH=. python benchmarks/gate_tiles.py ")
    assert shlex.split(line)[3:] == argv


def test_result_files_are_named_by_the_gpu_model():
    """The nvidia-smi names the device machines report, and two that have neither a model
    word first nor a space-free name: an H100's files were named by its memory type."""
    from benchmarks.records import gpu_tag

    names = {"NVIDIA H200": "h200", "NVIDIA H100 80GB HBM3": "h100", "NVIDIA A100-SXM4-80GB": "a100",
             "NVIDIA GH200 480GB": "gh200", "NVIDIA L40S": "l40s", "Tesla T4": "t4", "cuda": "cuda", "": "gpu"}
    assert {name: gpu_tag(name) for name in names} == names
