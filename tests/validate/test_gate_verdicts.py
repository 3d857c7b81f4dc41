"""Gate verdicts on constructed tables: PASS / WARN / FAIL / INCONCLUSIVE / INVALID,
the family correction, prove-safe and equivalence modes, and the run decision."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats
from statsmodels.stats.multitest import multipletests

from v41val.cli.common import EXIT_INCONCLUSIVE, EXIT_INVALID, EXIT_NO_GO, EXIT_OK
from validate.gate import (
    DECISION_EXIT_CODES,
    GateInput,
    HealthReport,
    evaluate_gate,
    parse_policy,
)
from validate.stats import PairedOutcomes


def table(n, b, c, task="t"):
    """Paired 0/1 outcomes with b A-only and c B-only right items (rest both right)."""
    a = np.r_[np.ones(b), np.zeros(c), np.ones(n - b - c)]
    bb = np.r_[np.zeros(b), np.ones(c), np.ones(n - b - c)]
    return PairedOutcomes.from_arrays(a, bb, task=task, metric="acc")


def policy(tasks, **gate):
    return parse_policy({"gate": gate, "tasks": tasks})


def gate_one(n, b, c, margin, health=None, **gate):
    pol = policy({"t": {"margin": margin}}, **gate)
    run = evaluate_gate(pol, {"t": GateInput(table(n, b, c), health or HealthReport())})
    return run, run.tasks[0]


def hand_tango_z(b, c, n, theta):
    """Tango's statistic from the paper's formula (n12 = c, n21 = b)."""
    A = 2 * n
    B = -b - c + (2 * n - c + b) * theta
    C = -b * theta * (1 - theta)
    q = (math.sqrt(B * B - 4 * A * C) - B) / (2 * A)
    return (c - b - n * theta) / math.sqrt(n * (2 * q + theta * (1 - theta)))


def test_pass_with_bounds_and_pvalue_by_hand():
    run, v = gate_one(1000, 10, 10, 3.0)
    assert v.verdict == "PASS" and run.decision == "GO" and run.exit_code == 0
    z = hand_tango_z(10, 10, 1000, -0.03)
    assert v.p_noninferior == pytest.approx(stats.norm.sf(z), rel=1e-9)
    # the lower bound is where the score statistic equals z_{0.95}
    assert hand_tango_z(10, 10, 1000, v.lower_bound) == pytest.approx(stats.norm.ppf(0.95), abs=1e-6)
    assert v.lower_bound > -0.03 and v.delta == 0.0
    text = v.report()
    for piece in ("n=1000", "alpha=0.05", "margin 3.00", "MDE", "Tango"):
        assert piece in text


def test_warn_is_a_flagged_pass():
    run, v = gate_one(1319, 40, 15, 5.0)
    assert v.verdict == "WARN" and v.passed and run.decision == "GO"
    assert v.p_worse == pytest.approx(stats.norm.cdf(-25 / math.sqrt(55)), rel=1e-9)


def test_fail_when_the_upper_bound_is_below_the_margin():
    run, v = gate_one(1000, 60, 0, 1.0)
    assert v.verdict == "FAIL" and run.decision == "NO-GO" and run.exit_code == 1
    assert v.upper_bound < -0.01


def test_inconclusive_reports_the_n_that_would_decide():
    run, v = gate_one(100, 3, 2, 2.0)
    assert v.verdict == "INCONCLUSIVE" and run.decision == "INCONCLUSIVE" and run.exit_code == 3
    assert v.lower_bound < -0.02 < v.upper_bound
    assert v.n_to_decide is not None and v.n_to_decide > 100
    assert f"n to decide: {v.n_to_decide}" in v.report()
    # the n is enough: at that n, with the observed rates, the planned power is met
    from validate.stats.power import noninferiority_power

    assert noninferiority_power(v.n_to_decide, 0.05, 0.02, 0.05, -0.01) >= 0.8
    prove_safe, v2 = gate_one(100, 3, 2, 2.0, mode="prove-safe")
    assert v2.verdict == "INCONCLUSIVE" and prove_safe.decision == "NO-GO"


@pytest.mark.parametrize(
    "health,needle",
    [
        (HealthReport(coverage=0.99), "coverage"),
        (HealthReport(invalid_rate_a=0.01, invalid_rate_b=0.08), "invalid-answer"),
        (HealthReport(empty_rate_a=0.0, empty_rate_b=0.05), "empty-output"),
        (HealthReport(length_ratio=3.0), "length ratio"),
    ],
)
def test_invalid_on_failed_health(health, needle):
    run, v = gate_one(1000, 10, 10, 3.0, health=health)
    assert v.verdict == "INVALID" and run.decision == "INVALID" and run.exit_code == 4
    assert any(needle in r for r in v.reasons)


def test_missing_task_is_invalid_and_advisory_does_not_decide():
    pol = policy({"t": {"margin": 3.0}, "u": {"margin": 1.0, "tier": "advisory"}})
    run = evaluate_gate(pol, {"t": GateInput(table(1000, 10, 10), HealthReport())})
    assert [v.verdict for v in run.tasks] == ["PASS", "INVALID"] and run.decision == "GO"
    run = evaluate_gate(pol, {
        "t": GateInput(table(1000, 10, 10), HealthReport()),
        "u": GateInput(table(1000, 60, 0, "u"), HealthReport()),
    })
    assert [v.verdict for v in run.tasks] == ["PASS", "FAIL"] and run.decision == "GO"
    pol = policy({"t": {"margin": 3.0}, "u": {"margin": 1.0}})
    assert evaluate_gate(pol, {"t": GateInput(table(1000, 10, 10), HealthReport())}).decision == "INVALID"


def test_holm_and_bonferroni_across_the_family():
    counts = {"t1": (1000, 12, 8), "t2": (1000, 15, 10), "t3": (1000, 14, 8)}  # p 0.015, 0.033, 0.041
    tasks = {name: {"margin": 1.5} for name in counts}
    inputs = {k: GateInput(table(*v, task=k), HealthReport()) for k, v in counts.items()}
    raw = [stats.norm.sf(hand_tango_z(b, c, n, -0.015)) for n, b, c in counts.values()]
    for method in ("holm", "bonferroni"):
        run = evaluate_gate(policy(tasks, correction=method), inputs)
        expected = multipletests(raw, method=method)[1]
        got = [v.p_noninferior_adjusted for v in run.tasks]
        np.testing.assert_allclose(got, expected, rtol=1e-9)
        for v in run.tasks:
            assert v.correction == method and method in run.report()
            # bound at the effective level agrees with the adjusted decision
            assert (v.lower_bound > -0.015) == (v.p_noninferior_adjusted <= 0.05)
    # a task that passes alone can lose its PASS once the family is corrected
    alone = [evaluate_gate(policy({k: {"margin": 1.5}}, correction="none"), {k: inputs[k]})
             for k in counts]
    joint = evaluate_gate(policy(tasks, correction="bonferroni"), inputs)
    changed = [a.tasks[0].verdict != j.verdict for a, j in zip(alone, joint.tasks, strict=True)]
    assert any(changed), [(a.tasks[0].verdict, j.verdict) for a, j in zip(alone, joint.tasks, strict=True)]


def test_equivalence_mode_fails_a_large_improvement():
    _, standard = gate_one(1000, 0, 40, 1.0)
    assert standard.verdict == "PASS"
    _, tost = gate_one(1000, 0, 40, 1.0, equivalence=True)
    assert tost.verdict == "FAIL" and tost.equivalence
    _, tost_ok = gate_one(2000, 10, 10, 2.0, equivalence=True)
    assert tost_ok.verdict == "PASS" and -0.02 < tost_ok.lower_bound < tost_ok.upper_bound < 0.02


def test_repeated_rows_use_the_clustered_test():
    rng = np.random.default_rng(1)
    items, reps = 400, 3
    clusters = np.repeat(np.arange(items), reps)
    a = (rng.random(items * reps) < 0.8).astype(float)
    b = np.where(rng.random(items * reps) < 0.03, 1 - a, a)
    paired = PairedOutcomes.from_arrays(a, b, clusters, task="t", metric="acc")
    pol = policy({"t": {"margin": 3.0}})
    v = evaluate_gate(pol, {"t": GateInput(paired, HealthReport())}).tasks[0]
    assert "clustered" in v.test and v.n_items == items
    d = b - a
    sums = np.bincount(clusters, weights=d - d.mean())
    # clustered over independent sums of squares, with the prior of one discordant row
    # at r = 3 rows per item (validate.gate.evidence)
    s_cl = items / (items - 1) * np.sum(sums**2)
    k_rows = d.size * np.var(d, ddof=1)
    deff = (s_cl + reps) / (k_rows + 1)
    # Tango's score statistic on the row counts, nuisance fitted by scipy, / sqrt(deff)
    nb, nc, rows, theta = int(np.sum(d == -1)), int(np.sum(d == 1)), d.size, -0.03
    q = optimize.minimize_scalar(
        lambda q: -(nb * math.log(q) + nc * math.log(q + theta)
                    + (rows - nb - nc) * math.log(1 - 2 * q - theta)),
        bounds=(-theta + 1e-12, (1 - theta) / 2 - 1e-12), method="bounded",
        options={"xatol": 1e-14}).x
    z = (nc - nb - rows * theta) / math.sqrt(rows * (2 * q + theta * (1 - theta)) * deff)
    assert v.p_noninferior == pytest.approx(stats.norm.sf(z), rel=1e-6)
    assert v.lower_bound < d.mean() < v.upper_bound


def test_decision_exit_codes_match_the_cli_constants():
    assert DECISION_EXIT_CODES == {
        "GO": EXIT_OK, "NO-GO": EXIT_NO_GO, "INCONCLUSIVE": EXIT_INCONCLUSIVE,
        "INVALID": EXIT_INVALID, "UNGATED": EXIT_OK,
    }
