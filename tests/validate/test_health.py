"""Health facts from a hand-filled store, counted by hand: coverage, invalid, empty,
truncation at max_gen_toks, length ratio; and the gate judging them."""

from __future__ import annotations

import pytest

from tasks.request import Generation, GenerationParams, Request
from validate.gate.health import HealthThresholds, health_failures
from validate.health import pair_health, variant_health
from validate.store import PlannedRequest, ResponseRecord, ResultsStore, ScoreRecord

METRIC = "exact_match,strict-match"
MAX = 8
# item -> (text, finish_reason, n_output_tokens, score, invalid) per variant; None = no response
BASE = {
    "i0": ("#### 1", "stop", 2, 1.0, False),
    "i1": ("#### 2", "stop", 2, 0.0, False),
    "i2": ("long answer without a result", "length", MAX, 0.0, True),
    "i3": ("#### 4", "stop", 2, 1.0, False),
    "i4": ("#### 5", "stop", 2, 1.0, False),
}
CAND = {
    "i0": ("", "stop", 0, 0.0, True),
    "i1": ("a b c d e f g h", "length", MAX, 0.0, True),
    "i2": ("x y z w v u t s", None, MAX, 0.0, True),  # no finish reason: the token count says it
    "i3": None,  # never answered (failed)
    "i4": ("#### 5", "stop", 2, 1.0, False),
}


def _fill(store: ResultsStore, plan_hash: str, variant: str, rows: dict) -> None:
    run = store.begin_run(plan_hash, identity={"git": None})
    for item, row in rows.items():
        req = Request(task="t", item_id=item, kind="generate", prompt=f"q {item}",
                      gen=GenerationParams(max_gen_toks=MAX))
        planned = PlannedRequest(variant, 0, req)
        if row is None:
            store.put_failure(run, planned, "EngineError: refused")
            continue
        text, finish, n_out, score, invalid = row
        store.put_response(run, planned, ResponseRecord(Generation(text, finish, n_out)))
        store.put_scores(plan_hash, planned.key, [ScoreRecord(METRIC, score, None, invalid)], "t@1")


@pytest.fixture()
def tables(tmp_path):
    with ResultsStore.open(tmp_path / "r.sqlite") as store:
        _fill(store, "p" * 64, "base", BASE)
        _fill(store, "p" * 64, "cand", CAND)
        yield store.outcomes("p" * 64, "base", "t"), store.outcomes("p" * 64, "cand", "t")


def test_variant_facts_equal_hand_counts(tables):
    base, cand = tables
    fb = variant_health(base, METRIC, generate=True, max_gen_toks=MAX)
    fc = variant_health(cand, METRIC, generate=True, max_gen_toks=MAX)
    assert (fb.planned, fb.responded, fb.missing, fb.coverage) == (5, 5, (), 1.0)
    assert (fc.planned, fc.responded, fc.missing, fc.failed) == (5, 4, ("i3#0",), ("i3#0",))
    assert fc.coverage == pytest.approx(4 / 5)
    assert fb.invalid_rate == pytest.approx(1 / 5) and fc.invalid_rate == pytest.approx(3 / 4)
    assert fb.empty_rate == 0.0 and fc.empty_rate == pytest.approx(1 / 4)
    assert fb.truncated_rate == pytest.approx(1 / 5) and fc.truncated_rate == pytest.approx(2 / 4)
    chars_b = sum(len(r[0]) for r in BASE.values()) / 5
    chars_c = sum(len(r[0]) for r in CAND.values() if r) / 4
    assert fb.mean_output_chars == pytest.approx(chars_b)
    report = pair_health(base, cand, METRIC, fb, fc)
    assert report.coverage == pytest.approx(4 / 5)  # rows both variants answered, of 5 planned
    assert report.length_ratio == pytest.approx(chars_c / chars_b)
    assert (report.truncated_rate_a, report.truncated_rate_b) == (fb.truncated_rate, fc.truncated_rate)


def test_the_gate_names_every_broken_check(tables):
    base, cand = tables
    fb = variant_health(base, METRIC, True, MAX)
    fc = variant_health(cand, METRIC, True, MAX)
    report = pair_health(base, cand, METRIC, fb, fc)
    # rows both answered (i0, i1, i2, i4), (flagged in base only, in cand only), by hand:
    # invalid i0 i1 in cand only; empty i0; truncated i1 (i2 is truncated in both)
    assert report.invalid_discordant == (0, 2)
    assert report.empty_discordant == (0, 1) and report.truncated_discordant == (0, 1)
    # at n = 5 two flipped items are no evidence: only the coverage check fails ...
    assert health_failures(report, HealthThresholds()) == ("coverage 80.00 % < 100.00 %",)
    # ... while alpha = 1 keeps the fixed thresholds alone, and every broken check fails
    reasons = health_failures(report, HealthThresholds(alpha=1.0))
    text = " | ".join(reasons)
    for check in ("coverage 80.00 %", "invalid-answer rate 75.00 %", "empty-output rate 25.00 %",
                  "truncated at max_gen_toks 50.00 %"):
        assert check in text, text
    # the same pair judged against itself is healthy
    same = pair_health(base, base, METRIC, fb, fb)
    assert same.coverage == 1.0 and same.length_ratio == 1.0
    assert health_failures(same, HealthThresholds()) == ()


def test_multiple_choice_has_no_text_facts(tables):
    base, _ = tables
    facts = variant_health(base, METRIC, generate=False)
    assert facts.empty_rate is None and facts.truncated_rate is None
    assert facts.mean_output_chars is None and facts.invalid_rate == pytest.approx(1 / 5)
