"""The clustered (repeats) path of the gate when the paired differences have no
variance: identical repeated runs must not be "significantly worse" (issue 13)."""

from __future__ import annotations

import numpy as np
import pytest

from validate.decisions import PASS, WARN
from validate.gate import GateInput, HealthReport, evaluate_gate, parse_policy
from validate.gate.evidence import ClusteredEvidence, evidence_for
from validate.stats import PairedOutcomes


def gate(paired, margin_points=5.0):
    policy = parse_policy({"tasks": {"t": {"margin": margin_points}}})
    return evaluate_gate(policy, {"t": GateInput(paired, HealthReport())}).tasks[0]


def test_identical_repeated_runs_are_not_significantly_worse():
    rng = np.random.default_rng(4)
    a = (rng.random(198 * 4) < 0.6).astype(float)
    repeated = PairedOutcomes.from_arrays(a, a, clusters=np.repeat(np.arange(198), 4),
                                          task="t", metric="m")
    single = PairedOutcomes.from_arrays(a[:198], a[:198], task="t", metric="m")
    assert isinstance(evidence_for(repeated), ClusteredEvidence)
    assert evidence_for(repeated).se_raw == 0.0
    v_rep, v_single = gate(repeated), gate(single)
    assert v_rep.p_worse == v_single.p_worse == 0.5  # was 0.0 (z = -inf) with repeats
    assert v_rep.verdict == v_single.verdict == PASS  # not WARN
    assert np.isfinite(v_rep.lower_bound) and v_rep.lower_bound < 0.0 < v_rep.upper_bound


def test_se_floor_is_the_se_of_one_discordant_row():
    """The floor (1 / rows) is within 1 % of the clustered SE of a table whose one
    discordant row is the only variation, computed by statsmodels' cluster-robust OLS."""
    import statsmodels.api as sm

    items, reps = 100, 4
    d = np.zeros(items * reps)
    d[0] = -1.0
    groups = np.repeat(np.arange(items), reps)
    fit = sm.OLS(d, np.ones_like(d)).fit(cov_type="cluster", cov_kwds={"groups": groups,
                                                                       "use_correction": False})
    a = np.ones_like(d)
    paired = PairedOutcomes.from_arrays(a, a + d, clusters=groups, task="t", metric="m")
    ev = evidence_for(paired)
    # statsmodels without its (N-1)/(N-K) factor is the CR1 G/(G-1) form used here
    assert ev.se_raw == pytest.approx(float(fit.bse[0]) * np.sqrt(items / (items - 1)), rel=1e-9)
    assert ev.se == pytest.approx(1.0 / d.size) and ev.se_raw == pytest.approx(ev.se, rel=0.01)


def test_a_real_repeated_difference_is_still_significant():
    """The floor changes nothing when the data have variance: a candidate that loses
    one item in five on every repeat is WARN at a 25-point margin."""
    rng = np.random.default_rng(5)
    items, reps = 200, 4
    a = np.ones(items * reps)
    lost = np.repeat(rng.random(items) < 0.2, reps)
    paired = PairedOutcomes.from_arrays(a, np.where(lost, 0.0, 1.0),
                                        clusters=np.repeat(np.arange(items), reps),
                                        task="t", metric="m")
    ev = evidence_for(paired)
    assert ev.se == ev.se_raw > 1.0 / (items * reps)
    v = gate(paired, margin_points=25.0)
    assert v.verdict == WARN and v.p_worse < 1e-6
