"""A metric value that is not a number in an lm-eval sample file (issue 13): an error
naming the file, line and field when the metric is a number on the other documents,
never a document silently dropped; a corpus-level metric (no document has a number)
is still left out."""

from __future__ import annotations

import hashlib
import json

import pytest

from v41val.cli import main
from validate.errors import SamplesFileError
from validate.lmeval_samples import read_run

NAME = "samples_gsm8k_x_2026-01-01T00-00-00.jsonl"


def write(path, values, bleu=False, blank_after=None):
    lines = []
    for i, v in enumerate(values):
        row = {"doc_id": i, "filter": "none", "metrics": ["acc"] + (["bleu"] if bleu else []),
               "acc": v, "prompt_hash": f"p{i}"}
        if bleu:
            row["bleu"] = ["reference", "prediction"]
        lines.append(json.dumps(row))
        if blank_after == i:
            lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("bad", ["1.0", [1], {"v": 1}])
def test_partly_numeric_metric_is_an_error_naming_file_line_field(tmp_path, bad):
    path = write(tmp_path / NAME, [1.0, 0.0, bad, 1.0], blank_after=0)
    with pytest.raises(SamplesFileError) as info:
        read_run(path)
    message = str(info.value)
    assert message.startswith(f"{path}:4: doc 2: field 'acc' is {bad!r}")  # line 4: a blank
    assert "expected a number" in message and "\n" not in message


def test_compare_exits_2_and_leaves_the_files_alone(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = write(tmp_path / "a" / NAME, [1.0, "x", 1.0])
    b = write(tmp_path / "b" / NAME, [1.0, "x", 1.0])
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (a, b)}
    with pytest.raises(SystemExit) as info:
        main(["compare", str(a), str(b)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and ":2: doc 1: field 'acc'" in err
    assert before == {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (a, b)}


def test_corpus_level_metric_is_still_left_out(tmp_path):
    run = read_run(write(tmp_path / NAME, [1.0, 0.0, 1.0], bleu=True))
    assert list(run.outcomes) == [("gsm8k_x", "acc,none")]
    assert run.outcomes[("gsm8k_x", "acc,none")].n_rows == 3
