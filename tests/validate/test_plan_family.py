"""``plan`` for the gate's family and for repeats, checked by simulation through the
gate itself (``evaluate_family`` / ``evaluate_gate``).

Each simulated run draws a baseline and one candidate per optimization that changes
each item independently with the planned discordance (a shared baseline, as in an
ablation), gates them all as one family, and counts the PASSes. The criterion
(issue 13): observed power within 3 points of what ``plan`` predicts. The fast tests
use a modest number of runs and allow 3 Monte Carlo SEs of the difference (simulation
and plan's own Monte Carlo); the slow ones use enough runs that 3 points is at least
3.5 SEs and assert the 3 points themselves.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from validate.decisions import PASSING
from validate.gate import GateInput, HealthReport, evaluate_gate, parse_policy
from validate.gate.family import evaluate_family
from validate.stats import PairedOutcomes
from validate.stats.family_power import ClaimModel, family_power
from validate.stats.planning import ClaimSpec, plan_family, plan_from_aa, plan_noninferiority
from validate.stats.power import noninferiority_power_exact
from validate.stats.power_repeats import clustered_power, within_item_correlation

ALPHA = 0.05
ACC = 0.8
TASKS = {"x": (1319, 0.01), "y": (448, 0.02)}  # (n, margin) per task
VARIANTS = ("v1", "v2", "v3")
DISC = 0.03


def candidate(rng, a, disc, delta):
    """B from A: each A-right item lost with prob p_b / acc, each A-wrong gained with
    p_c / (1 - acc), so the cells have the planned rates whatever A's draw."""
    p_b, p_c = (disc - delta) / 2, (disc + delta) / 2
    u = rng.random(a.size)
    return np.where(a == 1, np.where(u < p_b / ACC, 0.0, 1.0),
                    np.where(u < p_c / (1 - ACC), 1.0, 0.0))


def simulate_family(runs, seed, delta=0.0):
    policy = parse_policy({"gate": {"alpha": ALPHA, "correction": "holm"},
                           "tasks": {t: {"margin": 100 * m} for t, (_, m) in TASKS.items()}})
    rng = np.random.default_rng(seed)
    passes = {t: 0 for t in TASKS}
    for _ in range(runs):
        inputs = {}
        for task, (n, _) in TASKS.items():
            a = (rng.random(n) < ACC).astype(float)
            for v in VARIANTS:
                paired = PairedOutcomes.from_arrays(a, candidate(rng, a, DISC, delta),
                                                    task=task, metric="m")
                inputs[(v, task)] = GateInput(paired, HealthReport())
        family = evaluate_family(policy, VARIANTS, inputs)
        assert family.family_size == len(VARIANTS) * len(TASKS)
        for (_, task), verdict in family.verdicts.items():
            passes[task] += verdict.verdict in PASSING
    return {t: k / (runs * len(VARIANTS)) for t, k in passes.items()}


def planned(delta=0.0):
    specs = [ClaimSpec(t, n, m) for t, (n, m) in TASKS.items()]
    fam = plan_family(specs, DISC, ALPHA, 0.8, delta, variants=len(VARIANTS))
    return {p.task: p for p in fam.plans}, fam


def check_family(runs, seed, tolerance):
    observed = simulate_family(runs, seed)
    plans, _ = planned()
    print("observed per-claim PASS:", observed,
          "planned:", {t: p.power_at_full_family for t, p in plans.items()},
          "alone:", {t: p.power_at_full for t, p in plans.items()})
    for task, rate in observed.items():
        plan = plans[task]
        se = math.sqrt(rate * (1 - rate) / (runs * len(VARIANTS))
                       + plan.power_at_full_family * (1 - plan.power_at_full_family)
                       / plan.family_draws)
        limit = tolerance if tolerance is not None else 3 * se
        assert abs(rate - plan.power_at_full_family) <= limit, (task, rate, plan)
        # the uncorrected single-claim power is far off: the check has teeth
        assert plan.power_at_full - rate > 0.15
        assert plan.family_size == 6 and plan.sized_alpha == pytest.approx(ALPHA / 6)


def test_family_plan_matches_the_gate_fast():
    check_family(runs=120, seed=11, tolerance=None)


@pytest.mark.slow
def test_family_plan_within_3_points_of_the_gate():
    check_family(runs=1500, seed=12, tolerance=0.03)


def test_family_power_reduces_to_exact_cases():
    """One claim: Holm = the exact power at alpha. Bonferroni: exact at alpha / m. Holm
    over m alike claims lies between Bonferroni's and the single claim's power."""
    claim = ClaimModel(448, 0.02, 0.05)
    exact = noninferiority_power_exact(448, 0.05, 0.02, ALPHA)
    one = family_power([claim], "holm", ALPHA, draws=40_000, seed=1)
    assert abs(one.per_claim[0] - exact) <= 4 * one.mc_se
    bonf = plan_noninferiority("t", 448, 0.02, 0.05, ALPHA, family_size=4,
                               correction="bonferroni")
    assert bonf.family_draws == 0
    assert bonf.power_at_full_family == pytest.approx(
        noninferiority_power_exact(448, 0.05, 0.02, ALPHA / 4), abs=1e-12)
    holm = plan_noninferiority("t", 448, 0.02, 0.05, ALPHA, family_size=4)
    assert bonf.power_at_full_family < holm.power_at_full_family < exact
    assert holm.n_needed == bonf.n_needed  # sized at alpha / m either way
    none = plan_noninferiority("t", 448, 0.02, 0.05, ALPHA, family_size=4, correction="none")
    assert none.sized_alpha == ALPHA and none.power_at_full_family == pytest.approx(exact)


# --- repeats -------------------------------------------------------------------------

def repeated_runs(rng, items, reps, disc, rho, delta=0.0):
    """Per-row differences d in {-1, 0, 1} whose within-item correlation is rho: each
    item draws one d*, and each of its rows copies d* with probability sqrt(rho), else
    draws afresh (Cov = rho Var(d) within an item; the marginal of a row unchanged)."""
    p_b, p_c = (disc - delta) / 2, (disc + delta) / 2
    cells = np.array([-1.0, 1.0, 0.0])
    star = rng.choice(cells, size=items, p=[p_b, p_c, 1 - disc])
    fresh = rng.choice(cells, size=(items, reps), p=[p_b, p_c, 1 - disc])
    d = np.where(rng.random((items, reps)) < math.sqrt(rho), star[:, None], fresh).ravel()
    same = (rng.random(d.size) < ACC).astype(float)
    a = np.where(d == -1, 1.0, np.where(d == 1, 0.0, same))
    return PairedOutcomes.from_arrays(a, a + d, clusters=np.repeat(np.arange(items), reps),
                                      task="g", metric="m")


def simulate_repeats(runs, seed, items, reps, disc, rho, margin):
    policy = parse_policy({"gate": {"alpha": ALPHA}, "tasks": {"g": {"margin": 100 * margin}}})
    rng = np.random.default_rng(seed)
    passed = 0
    for _ in range(runs):
        paired = repeated_runs(rng, items, reps, disc, rho)
        verdict = evaluate_gate(policy, {"g": GateInput(paired, HealthReport())}).tasks[0]
        passed += verdict.verdict in PASSING
    return passed / runs


REPEAT_SETTINGS = [(198, 4, 0.10, 0.3, 0.03), (198, 4, 0.06, 0.8, 0.04),
                   # few discordant items (12 rows expected): plan was 5.5 points off the
                   # gate here before the design effect's prior (issue 13)
                   (100, 4, 0.03, 0.9, 0.02)]


def check_repeats(runs, seed, items, reps, disc, rho, margin, tolerance):
    observed = simulate_repeats(runs, seed, items, reps, disc, rho, margin)
    plan = plan_noninferiority("g", items, margin, disc, ALPHA, repeats=reps, rho=rho)
    unrepeated = plan_noninferiority("g", items, margin, disc, ALPHA)
    independent = plan_noninferiority("g", items, margin, disc, ALPHA, repeats=reps, rho=0.0)
    print(f"repeats: observed {observed:.3f} ({runs} runs), planned {plan.power_at_full:.3f} "
          f"(normal {plan.power_at_full_normal:.3f}), as if unrepeated "
          f"{unrepeated.power_at_full:.3f}, as if rows independent "
          f"{independent.power_at_full:.3f}")
    limit = tolerance if tolerance is not None else 3 * math.sqrt(
        observed * (1 - observed) / runs)
    assert abs(observed - plan.power_at_full) <= limit
    assert plan.power_at_full == clustered_power(items, reps, rho, disc, margin, ALPHA)
    # the check has teeth: ignoring the repeats, or their correlation, misses (at rho
    # 0.9 four repeats are worth barely more than one, so only the second applies)
    if rho < 0.9:
        assert abs(unrepeated.power_at_full - observed) > 0.05
    assert abs(independent.power_at_full - observed) > 0.05


@pytest.mark.parametrize("items,reps,disc,rho,margin", REPEAT_SETTINGS)
def test_repeats_plan_matches_the_gate_fast(items, reps, disc, rho, margin):
    check_repeats(500, 5, items, reps, disc, rho, margin, tolerance=None)


@pytest.mark.slow
@pytest.mark.parametrize("items,reps,disc,rho,margin", REPEAT_SETTINGS)
def test_repeats_plan_within_3_points_of_the_gate(items, reps, disc, rho, margin):
    """GPQA diamond with 4 repeats; 3,000 runs (~12 s): Monte Carlo SE at most 0.009,
    so 3 points is at least 3.3 SEs."""
    check_repeats(3000, 4, items, reps, disc, rho, margin, tolerance=0.03)


def test_within_item_correlation_from_a_pilot():
    """rho estimated from a large simulated pilot recovers the planted rho, and plan
    from such a pilot (--from-aa with repeats) uses it."""
    rng = np.random.default_rng(8)
    for rho in (0.0, 0.4, 0.9):
        pilot = repeated_runs(rng, 4000, 4, 0.1, rho)
        assert within_item_correlation(pilot) == pytest.approx(rho, abs=0.05)
    plan = plan_from_aa(pilot, 198, 0.03)
    assert plan.repeats == 4 and plan.rho == within_item_correlation(pilot)
    assert plan.power_at_full == clustered_power(198, 4, plan.rho, plan.discordance, 0.03,
                                                 ALPHA)
