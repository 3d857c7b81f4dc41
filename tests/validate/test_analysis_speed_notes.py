"""The analysis says when its two TTFT speed-ups (quality pass, speed sweep) point in
opposite directions, and every analysed run with speed figures carries the caveat on
what the speed CIs cover."""

from __future__ import annotations

from validate.analysis.headline import ttft_disagreements
from validate.analysis.model import HeadlineSection
from validate.speed.headline import HeadlineComparison
from validate.speed.types import SPEED_CI_CAVEAT, Speedup


def _section(ratio: float, ci: tuple[float, float]) -> HeadlineSection:
    cmp = HeadlineComparison("trim", "exact", None, Speedup("single_stream_ttft", ratio, ci, 8),
                             None)
    return HeadlineSection(settings={}, target_tokens_per_s_per_user=10.0, user_quantile=0.1,
                           headlines=(), comparisons=(cmp,), points={})


def _rows(ratio: float, ci: tuple[float, float]) -> list[dict]:
    return [{"variant": "trim", "task": "gsm8k", "speedups": (Speedup("ttft", ratio, ci, 50),)}]


def test_opposite_directions_are_said_once_with_both_ratios():
    # issue 17's demo: 0.23x in the quality pass, 1.64x in the sweep
    notes = ttft_disagreements(_section(1.64, (1.5, 1.8)), _rows(0.23, (0.2, 0.26)))
    assert len(notes) == 1
    assert "0.23x on the gsm8k quality pass" in notes[0] and "1.64x in the speed sweep" in notes[0]
    assert "ratio of median TTFT" in notes[0]


def test_agreement_or_an_unresolved_ci_says_nothing():
    assert ttft_disagreements(_section(1.64, (1.5, 1.8)), _rows(1.2, (1.1, 1.3))) == []
    assert ttft_disagreements(_section(1.64, (1.5, 1.8)), _rows(0.9, (0.7, 1.1))) == []
    assert ttft_disagreements(None, _rows(0.23, (0.2, 0.26))) == []


def test_the_caveat_names_what_is_not_covered():
    assert "not interleaved" in SPEED_CI_CAVEAT and "drift" in SPEED_CI_CAVEAT
