"""Quality calibration: the detection rates are the real gate's decisions on the seeded
subsets (checked against an independent recompute), the pool's exact probability is
the average over every subset, the fresh-item PASS prediction is ``v41val plan``'s
number, A/A stays at or below alpha, health failures show as INVALID (not FAIL), and
the planted short replay does what its docstring says in the runtime."""

from __future__ import annotations

import io
import itertools
import json
from contextlib import redirect_stdout

import numpy as np
import pytest
import torch
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from validate.calibration.detection import PairGate, detection_rates, subsamples
from validate.calibration.planted import planted_quality_levels
from validate.calibration.pool import QualityPool, VariantPool
from validate.calibration.predict import (
    fresh_outcome_probabilities,
    plan_prediction,
    pool_outcome_probabilities,
)
from validate.calibration.quality import analyse_pool, quality_policy
from validate.errors import ValidateInputError
from validate.gate import FAIL, INVALID, PASSING
from validate.stats.power import noninferiority_power_exact
from validate.store import ItemOutcome, OutcomeTable

TASK, METRIC = "testbed_arith", "exact_match,strict-match"
MARGIN, ALPHA = 0.02, 0.05


def table(variant: str, right, empty=None) -> OutcomeTable:
    """A stored-looking table: one scored row per item, ``right`` 0/1 per item."""
    empty = np.zeros(len(right), bool) if empty is None else np.asarray(empty, bool)
    rows = tuple(ItemOutcome(item_id=f"i{k:04d}", repeat=0, prompt_sha256=f"h{k}", responded=True,
                             finish_reason="stop", n_output_tokens=0 if e else 10,
                             output_chars=0 if e else 20, scores={METRIC: float(r)},
                             invalid={METRIC: bool(e)}, extracted={METRIC: None if e else "1"})
                 for k, (r, e) in enumerate(zip(right, empty, strict=True)))
    return OutcomeTable("p" * 64, variant, TASK, (METRIC,), rows)


def pool_pair(n_items: int, b: int, c: int, seed: int = 0, acc: float = 0.8):
    """Reference and candidate right/wrong with exactly b A-only and c B-only items."""
    rng = np.random.default_rng(seed)
    a = (rng.random(n_items) < acc).astype(float)
    cand = a.copy()
    right, wrong = np.flatnonzero(a == 1), np.flatnonzero(a == 0)
    cand[rng.choice(right, b, replace=False)] = 0.0
    cand[rng.choice(wrong, c, replace=False)] = 1.0
    return a, cand


def pair_gate(a, b, empty_b=None, policy=None) -> PairGate:
    policy = policy or quality_policy(TASK, margin_points=100 * MARGIN, alpha=ALPHA)
    return PairGate(table("ref", a), table("cand", b, empty_b), METRIC, policy, max_gen_toks=64)


def tango_z(b, c, n, theta0, shift=0.0):
    """Tango's score statistic, coded here from the paper's formula (not the gate's);
    ``shift`` is added to c - b (the gate's FAIL claim uses +0.5)."""
    qa, qb = 2.0 * n, -(b + c) + theta0 * (2.0 * n + b - c)
    qc = -b * theta0 * (1.0 - theta0)
    q = (np.sqrt(np.maximum(qb * qb - 4 * qa * qc, 0.0)) - qb) / (2 * qa)
    var = n * (2 * q + theta0 * (1 - theta0))
    return (c - b - n * theta0 + shift) / np.sqrt(var) if var > 0 else 0.0


def test_detection_rate_equals_an_independent_recompute_on_the_same_subsets():
    a, b = pool_pair(300, b=24, c=6, seed=1)
    gate = pair_gate(a, b)
    index_sets = subsamples(300, 80, 120, seed=3)
    rates, verdicts = detection_rates(gate, index_sets, ALPHA)
    z = stats.norm.ppf(1 - ALPHA)
    fails, worse, passes = [], [], []
    for index in index_sets:
        ra, rb = a[index], b[index]
        nb, nc, n = int(np.sum((ra == 1) & (rb == 0))), int(np.sum((ra == 0) & (rb == 1))), len(index)
        passed = tango_z(nb, nc, n, -MARGIN) >= z
        passes.append(passed)
        fails.append(not passed and tango_z(nb, nc, n, -MARGIN, 0.5) <= -z)
        # "significantly worse": McNemar's z (no continuity correction), one-sided
        res = mcnemar([[0, nb], [nc, 0]], exact=False, correction=False)
        worse.append(nb > nc and np.sqrt(res.statistic) >= z)
    assert rates.gate_fail == rates.test_fail == np.mean(fails)
    assert rates.worse == np.mean(worse)
    assert rates.gate_pass == rates.test_pass == np.mean(passes)
    assert rates.gate_invalid == 0.0 and rates.draws == 120 and rates.n == 80
    assert 0.0 < rates.gate_fail < 1.0  # a setting where the rate is informative
    assert all(v.n == 80 for v in verdicts)


def test_subsamples_are_seeded_distinct_and_shared_by_every_pair():
    s = subsamples(50, 20, 30, seed=7)
    assert s.shape == (30, 20)
    assert all(len(set(row)) == 20 and row.max() < 50 for row in s)
    assert np.array_equal(s, subsamples(50, 20, 30, seed=7))
    assert not np.array_equal(s, subsamples(50, 20, 30, seed=8))
    for bad in [(50, 51, 3), (50, 0, 3)]:
        with pytest.raises(ValidateInputError, match="--n"):
            subsamples(*bad, seed=0)
    with pytest.raises(ValidateInputError, match="--draws"):
        subsamples(50, 5, 0, seed=0)


def test_pool_probability_is_the_average_over_every_subset():
    a, b = pool_pair(14, b=5, c=1, seed=2)
    gate = pair_gate(a, b, policy=quality_policy(TASK, margin_points=5.0, alpha=0.1))
    every = np.array(list(itertools.combinations(range(14), 7)))  # 3432 subsets
    verdicts = [gate.verdict(index) for index in every]
    exact = pool_outcome_probabilities(7, 14, 5, 1, 0.05, 0.1)
    assert np.mean([v.test == FAIL for v in verdicts]) == pytest.approx(exact.fail, abs=1e-12)
    assert np.mean([v.test in PASSING for v in verdicts]) == pytest.approx(exact.passed, abs=1e-12)
    assert np.mean([v.p_worse <= 0.1 for v in verdicts]) == pytest.approx(exact.worse, abs=1e-12)
    assert 0 < exact.fail < 1 and 0 < exact.worse < 1


def test_finite_pool_matches_fresh_items_for_small_n_and_the_verdict_at_full_n():
    big = pool_outcome_probabilities(50, 20000, 1200, 400, MARGIN, ALPHA)
    fresh = fresh_outcome_probabilities(50, 0.08, -0.04, MARGIN, ALPHA)
    assert big.fail == pytest.approx(fresh.fail, abs=0.005)
    assert big.worse == pytest.approx(fresh.worse, abs=0.005)
    whole = pool_outcome_probabilities(400, 400, 24, 8, MARGIN, ALPHA)
    assert whole.fail in (0.0, 1.0) and whole.worse in (0.0, 1.0)
    assert fresh_outcome_probabilities(400, 0.08, -0.04, MARGIN, ALPHA).fail not in (0.0, 1.0)


@pytest.mark.parametrize("n,disc,delta", [(50, 0.10, -0.05), (200, 0.08, -0.03), (500, 0.03, 0.0)])
def test_fresh_pass_probability_is_plans_power_and_the_cli_prints_it(n, disc, delta):
    from v41val.cli import main

    fresh = fresh_outcome_probabilities(n, disc, delta, MARGIN, ALPHA)
    plan = plan_prediction(n, disc, delta, MARGIN, ALPHA)
    assert fresh.passed == pytest.approx(noninferiority_power_exact(n, disc, MARGIN, ALPHA, delta),
                                         abs=1e-9)
    out = io.StringIO()
    with redirect_stdout(out):
        main(["plan", "--margin", str(100 * MARGIN), "--discordance", str(disc), "--delta",
              str(100 * delta), "--n", str(n), "--alpha", str(ALPHA), "--json"])
    printed = json.loads(out.getvalue())
    assert plan.power_exact == pytest.approx(printed["power_at_full"], rel=1e-9, abs=1e-12)
    assert plan.power_normal == pytest.approx(printed["power_at_full_normal"], rel=1e-9, abs=1e-12)


def test_plan_prediction_holds_where_the_candidate_is_never_worse():
    """b = 0 (D = delta > 0): plan's MDE search has no sign change there, the power is
    still defined and the calibration must not fail on it."""
    plan = plan_prediction(400, 0.0175, 0.0175, MARGIN, ALPHA)
    assert plan.power_exact == pytest.approx(
        noninferiority_power_exact(400, 0.0175, MARGIN, ALPHA, 0.0175)) and plan.power_exact > 0.99


def test_aa_detection_stays_at_or_below_alpha():
    """Delta 0 in the pool (b = c) with real discordance: FAIL and "worse" rates stay
    within alpha plus three Monte Carlo SEs, and so do the exact probabilities."""
    a, b = pool_pair(2000, b=60, c=60, seed=4)
    gate = pair_gate(a, b)
    draws = 400
    bound = ALPHA + 3 * np.sqrt(ALPHA * (1 - ALPHA) / draws)
    for n in (100, 400):
        rates, _ = detection_rates(gate, subsamples(2000, n, draws, seed=0), ALPHA)
        assert rates.gate_fail <= bound and rates.worse <= bound
        exact = pool_outcome_probabilities(n, 2000, 60, 60, MARGIN, ALPHA)
        assert exact.fail <= ALPHA and exact.worse <= ALPHA + 0.01
        assert abs(rates.worse - exact.worse) <= 4 * np.sqrt(exact.worse * (1 - exact.worse) / draws)


def test_identical_outcomes_are_never_detected():
    a, _ = pool_pair(100, b=0, c=0)
    rates, _ = detection_rates(pair_gate(a, a), subsamples(100, 50, 50, seed=0), ALPHA)
    assert rates.gate_fail == rates.worse == rates.gate_invalid == 0.0


def test_unhealthy_candidate_is_invalid_for_the_gate_but_not_for_the_test():
    a, b = pool_pair(200, b=30, c=2, seed=5)
    empty = np.zeros(200, bool)
    # empty outputs, scored wrong: 20 % of the items, so every subsample of 100 shows a
    # rise the health test calls significant at its alpha (0.001: >= 10 one-way items)
    empty[np.flatnonzero(b == 0)[:40]] = True
    assert empty.sum() == 40
    gate = pair_gate(a, b, empty_b=empty)
    rates, verdicts = detection_rates(gate, subsamples(200, 100, 40, seed=1), ALPHA)
    assert rates.gate_invalid == 1.0 and rates.gate_fail == 0.0
    assert rates.test_fail > 0.5  # the statistics alone would FAIL it
    assert {v.gate for v in verdicts} == {INVALID}


def test_analyse_pool_builds_rows_for_every_pair_and_n():
    levels = planted_quality_levels(32, noise=[0.5], replay_short=[2])
    a, _ = pool_pair(120, 0, 0, seed=6)
    _, noisy = pool_pair(120, 10, 2, seed=6)
    _, short = pool_pair(120, 14, 1, seed=6)
    _, bounded = pool_pair(120, 1, 1, seed=6)
    tables = {"exact": a, "bounded": bounded, "noise-0.5": noisy, "short-2": short}
    pool = QualityPool(TASK, METRIC, 64, "p" * 64, "store.sqlite",
                       {k: VariantPool(k, table(k, v), 1.0) for k, v in tables.items()})
    policy = quality_policy(TASK, margin_points=2.0, alpha=ALPHA)
    result = analyse_pool(pool, levels, policy, [30, 120, 500], draws=25, seed=2)
    assert result.ns == (30, 120, 500) and "n = 500: beyond the 120 items run" in result.notes[0]
    beyond = result.rows[-1].cells[-1]
    assert beyond.observed is None and beyond.pool is None and 0 < beyond.fresh.fail <= 1
    pairs = [(r.row.label, r.row.pair) for r in result.rows]
    assert pairs == [("A/A control", "exact vs exact"), ("bounded replay", "bounded vs exact"),
                     ("logit_noise=0.5", "noise-0.5 vs exact"),
                     ("replay_short=2", "short-2 vs bounded"), ("replay_short=2", "short-2 vs exact")]
    control, *_, short_vs_exact = result.rows
    assert control.discordance == 0.0 and all(c.observed.gate_fail == 0 for c in control.cells[:2])
    assert (short_vs_exact.b, short_vs_exact.c) == (14, 1)
    assert short_vs_exact.delta == pytest.approx(-13 / 120)
    full = short_vs_exact.cells[1]  # n = the pool: every draw is the whole pool
    assert full.observed.gate_fail == (1.0 if short_vs_exact.verdict.verdict == FAIL else 0.0)
    assert full.pool.fail == full.observed.gate_fail
    doc = json.loads(json.dumps(result.to_dict()))
    assert doc["policy"]["margin_points"] == 2.0 and doc["rows"][4]["cells"][0]["n"] == 30
    assert doc["variants"]["short-2"]["options"] == {"swa": "bounded", "replay_tokens": 30}
    with pytest.raises(ValidateInputError, match="exceeds"):
        analyse_pool(pool, levels, policy, [1000], draws=5)


def test_planted_levels_are_checked_and_pair_short_replay_twice():
    levels = planted_quality_levels(16, noise=[0.1], drop_window=[4], replay_short=[1, 3])
    names = [v.name for v in levels.variants]
    assert names == ["exact", "bounded", "noise-0.1", "drop-4", "short-1", "short-3"]
    assert levels.variants[-1].table() == {"swa": "bounded", "replay_tokens": 13}
    assert levels.variants[3].table() == {"swa": "exact", "perturb": {"drop_window": 4}}
    for kwargs, fragment in [({"replay_short": [16]}, "--replay-short"),
                             ({"drop_window": [0]}, "--drop-window"),
                             ({"noise": [0.0]}, "--noise"), ({"replay_short": [2, 2]}, "twice")]:
        with pytest.raises(ValidateInputError, match=fragment):
            planted_quality_levels(16, **kwargs)


def test_short_replay_does_what_its_docstring_says():
    """replay_tokens = W - 1 only shortens the window (finite logits, different from
    correct replay); W - k for k >= 2 reads never-computed window KV on the first k - 1
    decode steps after a trimmed prefill, which this runtime keeps as NaN."""
    from runtime.model import SeqChunk, V41Model
    from runtime.options import RuntimeOptions
    from validate.engines.builtin_source import ModelSource, WeightsPool

    weights = WeightsPool().weights(ModelSource.micro(seed=0))
    w = weights.config.sliding_window
    tokens = torch.randint(3, 200, (60,), generator=torch.Generator().manual_seed(1))

    def rows(replay_tokens):
        model = V41Model(weights, RuntimeOptions(swa="bounded", replay_tokens=replay_tokens))
        state = model.new_state()
        out = [model.forward([SeqChunk(state, tokens[:50])])[0].logits[-1]]
        out += [model.forward([SeqChunk(state, t.view(1))])[0].logits[-1] for t in tokens[50:56]]
        return torch.stack(out)

    correct, one, four = rows(None), rows(w - 1), rows(w - 4)
    assert torch.isfinite(correct).all() and torch.isfinite(one).all()
    assert not torch.equal(one[0], correct[0])  # the last prefill row reads 1 short
    nan_steps = [bool(torch.isnan(r).any()) for r in four]
    assert nan_steps == [False, True, True, True, False, False, False]  # k - 1 = 3 steps


def test_cached_verdicts_equal_uncached_gate_calls():
    """The caches (by counts, and by counts plus failed health checks) never change a
    verdict: every draw equals a fresh ``evaluate_gate`` on freshly measured inputs."""
    from validate.gate import GateInput, HealthReport, evaluate_gate

    a, b = pool_pair(150, b=12, c=3, seed=8, acc=0.5)
    empty = np.zeros(150, bool)
    # empty outputs on a quarter of the pool: a subset of 40 holds about 10 of them, the
    # fewest the health test (alpha 0.001) calls significant, so some subsets are INVALID
    empty[np.flatnonzero(b == 0)[:38]] = True
    assert empty.sum() == 38
    gate = pair_gate(a, b, empty_b=empty)
    seen = set()
    for index in subsamples(150, 40, 60, seed=5):
        got = gate.verdict(index)
        paired, health = gate._paired_and_health(index)
        direct = evaluate_gate(gate.policy, {TASK: GateInput(paired, health)}).tasks[0]
        bare = evaluate_gate(gate.policy, {TASK: GateInput(paired, HealthReport())}).tasks[0]
        assert (got.gate, got.test, got.p_worse) == (direct.verdict, bare.verdict, bare.p_worse)
        seen.add(got.gate)
    assert INVALID in seen and len(seen) > 1
