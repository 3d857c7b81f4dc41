"""The demo's sentences follow from the numbers (validate.demo.conclusions, lead).

Each clause is rebuilt here from a report document's own numbers: the discordance
tables, the gate's bounds and margins, the worst task's KL and top-1, the median TTFT
speed-up and the variant's SWA mode; the KL scale is checked against a direct Monte
Carlo of Gaussian logit noise (scipy's softmax), and the floor line against chance 25 %
for a four-choice task. The real demo run's files and sentences are checked in
``tests/validate/test_demo.py`` (one slow demo run serves both).
"""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from scipy.special import log_softmax

from validate.demo.conclusions import (
    WARM_REPLAY_COST,
    kl_phrase,
    noise_equivalent,
    optimization_sentences,
)
from validate.demo.lead import floor_lines


def _comparison(variant, b, c, n, verdict, lower, margin=0.03, need=None, ttft=0.5):
    return {"variant": variant, "status": "INVALID" if verdict == "INVALID" else verdict,
            "table": {"b": b, "c": c, "n": n, "both_right": 0, "both_wrong": n - b - c},
            "delta": (c - b) / n, "health_failures": [],
            "verdict": {"verdict": verdict, "lower_bound": lower, "margin": margin,
                        "n_to_decide": need, "reasons": []},
            "speedups": {"ttft": {"ratio": ttft, "ci": None, "n": n}}}


def _doc(comparisons_by_task, options, fidelity, warm=True, floor=(), decisions=None):
    tasks = []
    for task, comps in comparisons_by_task.items():
        variants = [{"variant": "base", "is_baseline": True, "accuracy": 0.5, "fidelity": None}]
        variants += [{"variant": c["variant"], "is_baseline": False, "accuracy": 0.5,
                      "fidelity": fidelity.get((c["variant"], task))} for c in comps]
        tasks.append({"task": task, "floor": task in floor, "chance": 0.0,
                      "variants": variants, "comparisons": comps})
    return {"run": {"warm": warm}, "tasks": tasks, "variant_decisions": decisions or {},
            "variants": [{"variant": "base", "is_baseline": True, "config": {}}]
            + [{"variant": v, "is_baseline": False, "config": {"options": o}}
               for v, o in options.items()]}


def _fid(kl, top1):
    return {"kl_mean": kl, "top1_agreement": top1}


def test_each_clause_is_rebuilt_from_the_numbers():
    doc = _doc(
        {"t1": [_comparison("replay", 2, 1, 100, "INCONCLUSIVE", -0.051, need=420, ttft=0.4),
                _comparison("fused", 0, 0, 100, "PASS", -0.012, ttft=1.3)],
         "t2": [_comparison("replay", 1, 0, 50, "INCONCLUSIVE", -0.08, need=610, ttft=0.6),
                _comparison("fused", 1, 1, 50, "PASS", -0.02, ttft=1.1)]},
        {"replay": {"swa": "bounded"}, "fused": {"swa": "exact"}},
        {("replay", "t1"): _fid(2e-6, 0.99), ("replay", "t2"): _fid(8e-6, 0.97),
         ("fused", "t1"): _fid(0.0, 1.0), ("fused", "t2"): _fid(0.0, 1.0)},
        decisions={"replay": "INCONCLUSIVE", "fused": "GO"})
    replay, fused = optimization_sentences(doc)
    # replay: 3 + 1 changed of 150; worst bound t2 -8.0 pts; the largest n to decide
    assert replay.startswith("replay (INCONCLUSIVE): too few items to decide: 4 of 150 answers "
                             "changed (3 right to wrong, 1 wrong to right, delta -1.3 pts)")
    assert "lower bound on t2 is -8.0 pts against a margin of -3.0 pts" in replay
    assert "about 610 items per task would decide" in replay
    assert "KL 8.0e-06 nats/token" in replay and "top-1 agreement 97.0 %" in replay
    assert f"std {np.sqrt(2 * 8e-6):.1g}" in replay
    ratio = statistics.median([0.4, 0.6])
    assert f"{1 / ratio:.2f}x slower" in replay and WARM_REPLAY_COST in replay
    # fused: exact SWA, faster, identical distributions: no replay clause
    assert fused.startswith("fused (GO): no accuracy cost beyond the margin: 2 of 150 answers "
                            "changed (1 right to wrong, 1 wrong to right, delta +0.0 pts)")
    assert "lower bound on t2 is -2.0 pts" in fused and "KL 0" in fused
    assert f"{statistics.median([1.3, 1.1]):.2f}x faster" in fused
    assert WARM_REPLAY_COST not in fused


def test_the_replay_cost_is_named_only_when_warm_bounded_and_slower():
    def sentence(warm, swa, ttft):
        doc = _doc({"t": [_comparison("v", 0, 0, 10, "INCONCLUSIVE", -0.3, ttft=ttft)]},
                   {"v": {"swa": swa}}, {}, warm=warm)
        return optimization_sentences(doc)[0]

    assert WARM_REPLAY_COST in sentence(True, "bounded", 0.5)
    for args in ((False, "bounded", 0.5), (True, "exact", 0.5), (True, "bounded", 1.5)):
        assert WARM_REPLAY_COST not in sentence(*args), args
    assert "time to first token as the baseline's (1.03x)" in sentence(True, "exact", 1.03)
    assert "time to first token 1.06x faster" in sentence(True, "exact", 1.06)


def test_fail_and_floor_and_invalid_say_so():
    doc = _doc({"t": [_comparison("v", 12, 1, 100, "FAIL", -0.17)],
                "f": [_comparison("v", 0, 0, 100, "INCONCLUSIVE", -0.05)]},
               {"v": {"swa": "bounded"}}, {}, floor=("f",))
    (s,) = optimization_sentences(doc)
    assert "it costs accuracy: t -11.0 pts (12 right to wrong), worse than the margin" in s
    assert "13 of 100 answers changed" in s  # the floor task is not counted ...
    assert "(f: the baseline is at the floor, where accuracy cannot show a cost)" in s
    broken = _doc({"t": [_comparison("v", 0, 0, 10, "INVALID", -0.3)]}, {"v": {}}, {})
    broken["tasks"][0]["comparisons"][0]["health_failures"] = ["coverage 90.00 % < 100.00 %"]
    assert "the run is broken for it (coverage 90.00 % < 100.00 %)" in (
        optimization_sentences(broken)[0])


def test_kl_scale_matches_gaussian_logit_noise():
    """KL(p || softmax(z + noise)) for noise of std s, by Monte Carlo with scipy: the
    scale's sigma is s * sqrt(1 - sum p^2) (<= s), to second order."""
    rng = np.random.default_rng(0)
    for vocab, peak in ((512, 0.0), (512, 4.0)):
        z = rng.normal(size=vocab) * peak
        logp = log_softmax(z)
        p = np.exp(logp)
        for s in (0.01, 0.05):
            noisy = log_softmax(z + rng.normal(scale=s, size=(4000, vocab)), axis=1)
            kl = float(np.mean(np.sum(p * (logp - noisy), axis=1)))
            expected = s * np.sqrt(1 - np.sum(p ** 2))
            assert noise_equivalent(kl) == pytest.approx(expected, rel=0.05)
            assert noise_equivalent(kl) <= s * 1.02
    assert kl_phrase(0.0, 1.0).startswith("teacher-forced KL 0")


@pytest.mark.parametrize("accuracy,expected", [
    (0.30, "5.0 points above chance (25 %), too close to it"),
    (0.25, "at or below chance (25 %)"),
    (0.20, "at or below chance (25 %)"),
])
def test_floor_line_uses_the_tasks_chance(accuracy, expected):
    doc = {"tasks": [{"task": "gpqa", "floor": True, "chance": 0.25,
                      "variants": [{"is_baseline": True, "accuracy": accuracy}]}]}
    (line,) = floor_lines(doc)
    assert f"the baseline scores {100 * accuracy:.1f} %, {expected}, so accuracy" in line


def test_interleaved_rounds_are_read_with_their_intervals():
    """With rounds in the run, the sentence adds their TTFT and TPOT ratios and what each
    interval says, and labels the quality pass's figure as one window per variant."""
    doc = _doc({"t": [_comparison("v", 0, 0, 10, "INCONCLUSIVE", -0.3, ttft=0.5)]},
               {"v": {"swa": "bounded"}}, {}, warm=True)
    doc["interleaved"] = [{"variant": "v", "rounds": 6, "concurrency": 32, "speedups": {
        "ttft": {"ratio": 1.04, "ci": [0.84, 1.33], "n": 6, "statistic": "means"},
        "tpot": {"ratio": 0.82, "ci": [0.70, 0.95], "n": 6, "statistic": "means"}}}]
    (s,) = optimization_sentences(doc)
    assert "2.00x slower than the baseline" in s and "(quality pass, one window per variant)" in s
    assert ("in 6 interleaved rounds on cold prompts (95 % interval over rounds): "
            "TTFT 1.04x [0.84, 1.33], no change resolved; TPOT 0.82x [0.70, 0.95], slower") in s
    doc["interleaved"] = []
    assert "interleaved" not in optimization_sentences(doc)[0]
