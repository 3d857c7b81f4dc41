"""Calibration of the gate by simulation (seeded, vectorised; well under 30 s on 2 cores).

Correlated Bernoulli pairs are drawn as a multinomial over the four cells of the paired
2x2 table (both right, A only, B only, both wrong) at realistic accuracy and discordance,
4,000 trials per setting. The rates are computed with the same vectorised score-test
functions the gate calls (``validate.stats.score_interval``); a separate check runs
``evaluate_gate`` itself on simulated tables and requires identical decisions.

(a) A/A: the one-sided "candidate is worse" test rejects at 0.02-0.06 at alpha = 0.05.
(b) at the boundary (true delta = -margin) the gate PASSes at most alpha + 0.015.
(c) around the margin, the PASS rate is within 5 points of the power ``plan`` predicts.
"""

from __future__ import annotations

import numpy as np

from validate.gate import PASSING, GateInput, HealthReport, evaluate_gate, parse_policy
from validate.stats import PairedOutcomes, plan_noninferiority
from validate.stats.score_interval import p_greater, p_less

ALPHA = 0.05
TRIALS = 4000
# (n, accuracy of A, discordance, margin): GSM8K, GPQA main and diamond sizes.
BOUNDARY_SETTINGS = [
    (1319, 0.90, 0.03, 0.010),
    (1319, 0.95, 0.01, 0.005),
    (1319, 0.60, 0.10, 0.020),
    (448, 0.80, 0.05, 0.020),
    (448, 0.95, 0.02, 0.015),
    (198, 0.60, 0.10, 0.040),
    (198, 0.95, 0.04, 0.030),
]


def draw_counts(rng, n, acc, disc, delta, trials):
    """(b, c) counts of ``trials`` simulated paired runs; delta = acc_B - acc_A."""
    p_b, p_c = (disc - delta) / 2, (disc + delta) / 2
    probs = [acc - p_b, p_b, p_c, 1 - acc - p_c]
    assert min(probs) >= 0
    cells = rng.multinomial(n, probs, size=trials)  # (trials, 4)
    return cells[:, 1], cells[:, 2]


def test_gate_calibration_by_simulation():
    rng = np.random.default_rng(20261129)
    aa_rates = {}
    for n in (198, 448, 1319):
        for acc in (0.6, 0.8, 0.95):
            for disc in (0.01, 0.03, 0.10):
                b, c = draw_counts(rng, n, acc, disc, 0.0, TRIALS)
                worse = p_less(b, c, n, 0.0) <= ALPHA  # H0 delta >= 0 rejected
                aa_rates[(n, acc, disc)] = float(worse.mean())
    print("A/A one-sided 'worse' rejection rates:", aa_rates)
    bad = {k: v for k, v in aa_rates.items() if not 0.02 <= v <= 0.06}
    assert not bad, f"A/A size outside [0.02, 0.06]: {bad}"

    boundary, power_gaps = {}, {}
    for n, acc, disc, margin in BOUNDARY_SETTINGS:
        for delta in (-margin, -margin / 2, 0.0, margin / 2):
            b, c = draw_counts(rng, n, acc, disc, delta, TRIALS)
            passed = float((p_greater(b, c, n, -margin) <= ALPHA).mean())
            if delta == -margin:
                boundary[(n, acc, disc, margin)] = passed
                continue
            plan = plan_noninferiority("sim", n, margin, disc, ALPHA, 0.8, delta)
            power_gaps[(n, acc, disc, margin, delta)] = (
                passed, plan.power_at_full, plan.power_at_full_normal
            )
    print("PASS rate at the boundary:", boundary)
    print("observed vs planned power:", power_gaps)
    too_high = {k: v for k, v in boundary.items() if v > ALPHA + 0.015}
    assert not too_high, f"boundary PASS rate above alpha + 0.015: {too_high}"
    off = {k: v for k, v in power_gaps.items() if abs(v[0] - v[1]) > 0.05}
    assert not off, f"observed PASS rate more than 5 points from plan: {off}"
    # the closed-form (normal) power that sizes n is also within 5 points here
    off_normal = {k: v for k, v in power_gaps.items() if abs(v[0] - v[2]) > 0.05}
    assert not off_normal, f"normal-approximation power off by > 5 points: {off_normal}"
    # the grid covers low and high power, so (c) is not trivially satisfied
    planned = [v[1] for v in power_gaps.values()]
    assert min(planned) < 0.3 and max(planned) > 0.85


def test_evaluate_gate_makes_the_simulated_decisions():
    """The vectorised rule above is what ``evaluate_gate`` decides, table by table."""
    rng = np.random.default_rng(7)
    n, acc, disc, margin = 448, 0.8, 0.05, 0.02
    policy = parse_policy({"gate": {"alpha": ALPHA}, "tasks": {"t": {"margin": 2.0}}})
    b, c = draw_counts(rng, n, acc, disc, -margin / 2, 80)
    for bi, ci in zip(b.tolist(), c.tolist(), strict=True):
        a_out = np.r_[np.ones(bi), np.zeros(ci), np.ones(n - bi - ci)]
        b_out = np.r_[np.zeros(bi), np.ones(ci), np.ones(n - bi - ci)]
        paired = PairedOutcomes.from_arrays(a_out, b_out, task="t", metric="m")
        verdict = evaluate_gate(policy, {"t": GateInput(paired, HealthReport())}).tasks[0]
        expected_pass = float(p_greater(bi, ci, n, -margin)) <= ALPHA
        expected_fail = float(p_less(bi, ci, n, -margin)) <= ALPHA
        assert (verdict.verdict in PASSING) == expected_pass
        assert (verdict.verdict == "FAIL") == expected_fail
