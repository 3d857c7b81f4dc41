"""``plan`` for an equivalence (TOST) policy, checked by simulation through the gate itself:
PASS needs both one-sided tests, so its power is well below the non-inferiority power the
plan used to print for such a policy (issue 13: "plan ignores equivalence")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from validate.decisions import PASSING
from validate.gate import GateInput, HealthReport, evaluate_gate, parse_policy
from validate.stats import PairedOutcomes
from validate.stats.family_power import ClaimModel
from validate.stats.planning import ClaimSpec, plan_family, plan_noninferiority

ACC = 0.7


def candidate(rng, a, disc, delta):
    """B from A with the planned cell rates p_b = (D - delta)/2, p_c = (D + delta)/2."""
    p_b, p_c = (disc - delta) / 2, (disc + delta) / 2
    u = rng.random(a.size)
    return np.where(a == 1, np.where(u < p_b / ACC, 0.0, 1.0),
                    np.where(u < p_c / (1 - ACC), 1.0, 0.0))


def simulated_pass_rate(runs, seed, n, disc, margin, delta):
    policy = parse_policy({"gate": {"alpha": 0.05, "equivalence": True},
                           "tasks": {"g": {"margin": 100 * margin}}})
    rng = np.random.default_rng(seed)
    passes = 0
    for _ in range(runs):
        a = (rng.random(n) < ACC).astype(float)
        paired = PairedOutcomes.from_arrays(a, candidate(rng, a, disc, delta), task="g", metric="m")
        verdict = evaluate_gate(policy, {"g": GateInput(paired, HealthReport())}).tasks[0]
        passes += verdict.verdict in PASSING
    return passes / runs


@pytest.mark.parametrize("n,disc,margin,delta", [(448, 0.04, 0.02, 0.0), (1319, 0.03, 0.01, 0.003)])
def test_tost_plan_matches_the_gate(n, disc, margin, delta):
    plan = plan_noninferiority("g", n, margin, disc, 0.05, 0.8, delta, equivalence=True)
    alone = plan_noninferiority("g", n, margin, disc, 0.05, 0.8, delta)
    runs = 1500
    observed = simulated_pass_rate(runs, 7, n, disc, margin, delta)
    se = math.sqrt(observed * (1 - observed) / runs)
    print(f"n={n}: TOST PASS observed {observed:.3f}, plan {plan.power_at_full:.3f}, "
          f"non-inferiority plan {alone.power_at_full:.3f}")
    assert abs(observed - plan.power_at_full) <= max(3 * se, 0.01)
    assert plan.power_at_full < alone.power_at_full - 0.1  # the old plan over-promised
    assert "TOST" in plan.test and "TOST" in plan.report()


def test_tost_sample_size_reaches_the_power_and_a_smaller_n_does_not():
    plan = plan_noninferiority("g", 500, 0.02, 0.04, 0.05, 0.8, 0.0, equivalence=True)
    model = ClaimModel(plan.n_needed, 0.02, 0.04, equivalence=True)
    assert model.exact_power(0.05) >= 0.8
    smaller = ClaimModel(int(plan.n_needed * 0.9), 0.02, 0.04, equivalence=True)
    assert smaller.exact_power(0.05) < 0.8
    ni = plan_noninferiority("g", 500, 0.02, 0.04, 0.05, 0.8, 0.0)
    assert plan.n_needed > ni.n_needed


def test_tost_family_under_holm_uses_both_sides():
    specs = [ClaimSpec("x", 1319, 0.01), ClaimSpec("y", 448, 0.02)]
    tost = plan_family(specs, 0.03, 0.05, 0.8, 0.0, variants=3, equivalence=True)
    ni = plan_family(specs, 0.03, 0.05, 0.8, 0.0, variants=3)
    for a, b in zip(tost.plans, ni.plans, strict=True):
        assert a.equivalence and a.power_at_full_family < b.power_at_full_family
