"""lm-eval writes a loglikelihood response's is-greedy flag through its own
``sanitize_list`` (every leaf becomes a string: 'False'); the import must read the flag
back as it was, not as ``bool('False')``."""

from __future__ import annotations

import json

import pytest

lm_eval_utils = pytest.importorskip("lm_eval.utils")

from tasks.request import Request  # noqa: E402
from validate.errors import SamplesFileError  # noqa: E402
from validate.lmeval_import import _response  # noqa: E402


def _line(resps) -> dict:
    """A sample-log line as lm-eval serialises it (sanitize_list, then JSON)."""
    return json.loads(json.dumps({"doc_id": 7, "resps": lm_eval_utils.sanitize_list(resps)}))


def test_is_greedy_reads_back_as_lm_eval_wrote_it():
    request = Request("t", "7", "loglikelihood", prompt="Q", continuations=("a", "b", "c"))
    truth = [(-0.25, True), (-3.5, False), (-1.0, False)]
    line = _line([[r] for r in truth])
    assert line["resps"][1][0][1] == "False"  # what the file holds
    got = _response(request, line, "samples.jsonl:1")
    assert got.is_greedy == (True, False, False)
    assert got.values == (-0.25, -3.5, -1.0)


def test_a_flag_that_is_not_a_boolean_is_a_one_line_error():
    request = Request("t", "7", "loglikelihood", prompt="Q", continuations=("a",))
    with pytest.raises(SamplesFileError, match="samples.jsonl:1: doc 7: cannot read 'resps'"):
        _response(request, {"doc_id": 7, "resps": [[["-1.0", "maybe"]]]}, "samples.jsonl:1")
