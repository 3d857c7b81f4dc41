"""benchmarks/profile_ops.py's case specs: a malformed one is one line naming the spec and
what was expected (SystemExit before any GPU work)."""

from __future__ import annotations

import pytest

from benchmarks.profile_ops import build


@pytest.mark.parametrize("spec,expected", [
    ("topk:flash:1:131072:bogus", "expected topk:scale:rows:keys[:form], form one of ['chained', 'resident', "
                                  "'row_bound']"),
    ("topk:flash:1", "expected topk:scale:rows:keys[:form]"),
    ("gate:mid", "expected op:scale:rows[:use or :N]"),
    ("nope:mid:1", "unknown op 'nope', expected one of ['attention', 'attention_packed', 'attention_ring', "
                   "'compress', 'engram', 'gate', 'indexer', 'inv_rope', 'mhc', 'rope_quant', 'topk']"),
    ("gate:huge:1", "preset: expected one of ['flash', 'mid', 'testbed', 'tiny'], got 'huge'"),
    ("gate:mid:x", "expected whole numbers of rows (and keys), got ['x']"),
    ("indexer:mid:1:many", "expected whole numbers of rows (and keys), got ['1', 'many']"),
    ("mhc:mid:4096:bf16x2", "expected mhc:scale:rows[:projection], projection one of ['ieee', 'tf32x3', "
                            "'tf32x2', 'bf16x3', 'fma']"),
])
def test_a_malformed_case_is_one_line(spec, expected):
    with pytest.raises(SystemExit) as exc:
        build(None, spec)
    message = str(exc.value)
    assert message.startswith(f"profile_ops: case {spec!r}") and expected in message and "\n" not in message

