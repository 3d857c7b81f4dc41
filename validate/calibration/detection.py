"""How often the gate catches a pair on seeded subsamples of n items of a finite pool.

For one compared pair (reference A, candidate B, both run on the same N items) and one
n, ``draws`` subsets of n items are drawn without replacement (seeded; the same subsets
for every pair of a calibration, so rows differ only by what was planted). Each subset
is gated by the code ``v41val run`` gates with:

- its health is measured from the subset's stored rows (``validate.health.facts``:
  coverage, invalid / empty / truncated rates, output length ratio), its outcomes are
  paired (``pair_outcomes``), and ``validate.gate.evaluate_gate`` decides it with the
  policy's margin, alpha, correction, mode and health thresholds -- the *gate* rates;
- the same paired outcomes are decided once more with no health facts (nothing to
  check), which is the statistical verdict alone -- the *test* rates, the ones the
  power predictions are about. They differ exactly where a health check made the gate
  answer INVALID.

Subsampling a finite pool is not drawing fresh items: the subsets overlap, so the rate
estimates the pool's own hypergeometric probability (``predict.pool_outcome_
probabilities``), which is narrower than the fresh-item probability ``plan`` predicts,
increasingly so as n approaches N (at n = N every draw is the whole pool). The Monte
Carlo error of a rate over ``draws`` subsets is sqrt(r (1 - r) / draws).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from validate.errors import ValidateInputError
from validate.gate import (
    FAIL,
    INVALID,
    PASSING,
    GateInput,
    GatePolicy,
    HealthReport,
    evaluate_gate,
    health_failures,
)
from validate.health.facts import pair_health, variant_health
from validate.stats.outcomes import ItemOutcomes, PairedOutcomes, pair_outcomes
from validate.store import OutcomeTable


def subsamples(pool_size: int, n: int, draws: int, seed: int) -> np.ndarray:
    """(draws, n) item indices, each row n distinct indices of range(pool_size), sorted.

    Seeded by (seed, n) only, so every pair of a calibration sees the same subsets."""
    if not 0 < n <= pool_size:
        raise ValidateInputError(f"--n: {n} is outside [1, {pool_size}] (the items run)")
    if draws < 1:
        raise ValidateInputError(f"--draws: expected >= 1, got {draws}")
    rng = np.random.default_rng([int(seed), int(n)])
    out = np.empty((draws, n), dtype=np.int64)
    for d in range(draws):
        out[d] = np.sort(rng.choice(pool_size, size=n, replace=False))
    return out


def item_outcomes(table: OutcomeTable, metric: str) -> ItemOutcomes:
    """The scored rows of ``table`` on ``metric`` (what the analysis pairs)."""
    from validate.analysis.build import item_outcomes as stored_item_outcomes

    return stored_item_outcomes(table, metric)


@dataclass(frozen=True)
class DrawVerdict:
    """One subset's outcome: the gate's verdict (health included), the test's verdict
    (no health checks), the gate's "significantly worse" p-value, and (b, c, n)."""

    gate: str
    test: str
    p_worse: float | None
    b: int
    c: int
    n: int


class PairGate:
    """Gates subsets of one (reference, candidate) pair with ``evaluate_gate``.

    ``policy`` is reduced to the one task of the pair (a family of one claim, as in a
    ``v41val run`` of a plan with this one candidate on this one task). The statistical
    verdict depends on the subset only through (b, c, n), so it is cached by them; the
    gate's verdict also depends on the health facts, but only through the checks they
    fail (``evaluate_gate`` answers INVALID on any failure and otherwise decides the
    same evidence), so it is cached by (b, c, n, failed checks).
    """

    def __init__(self, reference: OutcomeTable, candidate: OutcomeTable, metric: str,
                 policy: GatePolicy, max_gen_toks: int | None, generate: bool = True) -> None:
        self.task = reference.task
        self.policy = replace(policy, tasks=(replace(policy.task(self.task), tier="critical",
                                                     metric=metric),))
        self.metric = metric
        self.max_gen_toks = max_gen_toks
        self.generate = generate
        ids_a = [r.item_id for r in reference.rows]
        ids_b = [r.item_id for r in candidate.rows]
        if ids_a != ids_b or len(set(ids_a)) != len(ids_a):
            raise ValidateInputError(f"{self.task}: {reference.variant} and {candidate.variant} "
                                     "were not run on the same items (one row per item)")
        self.reference, self.candidate = reference, candidate
        self._test_cache: dict[tuple, tuple[str, float | None]] = {}
        self._gate_cache: dict[tuple, str] = {}

    @property
    def pool_size(self) -> int:
        return len(self.reference.rows)

    def _subset(self, table: OutcomeTable, index: np.ndarray) -> OutcomeTable:
        return replace(table, rows=tuple(table.rows[i] for i in index))

    def full(self) -> tuple[PairedOutcomes, HealthReport]:
        return self._paired_and_health(np.arange(self.pool_size))

    def _paired_and_health(self, index: np.ndarray) -> tuple[PairedOutcomes, HealthReport]:
        a, b = self._subset(self.reference, index), self._subset(self.candidate, index)
        facts_a = variant_health(a, self.metric, self.generate, self.max_gen_toks)
        facts_b = variant_health(b, self.metric, self.generate, self.max_gen_toks)
        health = pair_health(a, b, self.metric, facts_a, facts_b)
        oa, ob = item_outcomes(a, self.metric), item_outcomes(b, self.metric)
        if not oa.n_rows or not ob.n_rows:
            raise ValidateInputError(f"{self.task}: no scored rows on {self.metric} in a subset")
        return pair_outcomes(oa, ob), health

    def _decide(self, paired: PairedOutcomes, health: HealthReport) -> tuple[str, float | None]:
        task = evaluate_gate(self.policy, {self.task: GateInput(paired, health)}).tasks[0]
        return task.verdict, task.p_worse

    def verdict(self, index: np.ndarray) -> DrawVerdict:
        paired, health = self._paired_and_health(index)
        b = int(np.sum((paired.a == 1.0) & (paired.b != 1.0)))
        c = int(np.sum((paired.a != 1.0) & (paired.b == 1.0)))
        key = (b, c, paired.n_rows)
        if key not in self._test_cache:  # no health facts: nothing for the gate to check
            self._test_cache[key] = self._decide(paired, HealthReport())
        test, p_worse = self._test_cache[key]
        gate_key = (b, c, paired.n_rows, health_failures(health, self.policy.health))
        if gate_key not in self._gate_cache:
            self._gate_cache[gate_key] = self._decide(paired, health)[0]
        return DrawVerdict(self._gate_cache[gate_key], test, p_worse, b, c, paired.n_rows)


@dataclass(frozen=True)
class DetectionRates:
    """Rates over the subsets of one n. ``gate_*``: the gate with its health checks;
    ``test_*``: the statistical verdict alone; ``worse``: the gate's "significantly
    worse" test at alpha (the WARN test, p_worse <= alpha)."""

    n: int
    draws: int
    gate_fail: float
    gate_invalid: float
    gate_pass: float
    test_fail: float
    test_pass: float
    worse: float

    @property
    def mc_se(self) -> float:
        """Monte Carlo SE of the gate FAIL rate over the draws."""
        r = self.gate_fail
        return float(np.sqrt(r * (1.0 - r) / self.draws))

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__} | {"mc_se": self.mc_se}


def detection_rates(gate: PairGate, index_sets: np.ndarray, alpha: float,
                    on_draw: Callable[[int], None] | None = None) -> tuple[DetectionRates,
                                                                           list[DrawVerdict]]:
    """Gate every subset (rows of ``index_sets``); the rates and the per-draw verdicts."""
    verdicts = []
    for d, index in enumerate(index_sets):
        verdicts.append(gate.verdict(index))
        if on_draw is not None:
            on_draw(d + 1)
    k = len(verdicts)

    def rate(flags) -> float:
        return float(sum(flags)) / k

    return DetectionRates(
        n=int(index_sets.shape[1]), draws=k,
        gate_fail=rate(v.gate == FAIL for v in verdicts),
        gate_invalid=rate(v.gate == INVALID for v in verdicts),
        gate_pass=rate(v.gate in PASSING for v in verdicts),
        test_fail=rate(v.test == FAIL for v in verdicts),
        test_pass=rate(v.test in PASSING for v in verdicts),
        worse=rate(v.p_worse is not None and v.p_worse <= alpha for v in verdicts),
    ), verdicts


def full_verdict(gate: PairGate):
    """The gate's ``TaskVerdict`` on the whole pool (health included)."""
    paired, health = gate.full()
    return evaluate_gate(gate.policy, {gate.task: GateInput(paired, health)}).tasks[0]
