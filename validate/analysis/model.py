"""What an analysed run is, as data: the object reports render and the CLI decides on.

Everything here is a frozen dataclass with ``to_dict()`` (JSON-able). It is produced by
``validate.analysis.build.analyze_run`` from a results store and never recomputed by a
renderer: a report shows these numbers and nothing else, so the terminal, Markdown,
HTML, JSON and JUnit outputs cannot disagree.

The renderers (``reports``) read these through the report document (``reports.document``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

# Run decisions: the gate's four plus UNGATED (no policy in the plan: exit 0 unless a
# variant is unhealthy, which is INVALID with or without a policy); validate.decisions.
from validate.decisions import (  # noqa: E402, F401  (re-exported)
    DECISION_EXIT_CODES,
    GO,
    INCONCLUSIVE,
    INVALID,
    NO_GO,
    UNGATED,
)
from validate.fidelity.types import FidelitySummary  # noqa: F401  (re-exported)
from validate.gate.health import HealthReport
from validate.gate.verdict import TaskVerdict
from validate.health.facts import VariantHealth  # noqa: F401  (re-exported for reports)
from validate.speed.types import Percentiles, SpeedSummary, Speedup  # noqa: F401  (re-exported)
from validate.stats.compare import MetricComparison
from validate.stats.jsonable import ToDict as _ToDict
from validate.stats.jsonable import json_safe
from validate.stats.jsonable import plain as _plain
from validate.stats.proportions import AccuracyEstimate


@dataclass(frozen=True)
class RunIdentity(_ToDict):
    """Which plan ran where: identity of every number in the report.

    ``run_ids`` are all execution attempts of this plan in the store (a resumed plan has
    several; their responses are pooled); ``run_id`` is the latest. ``identity`` holds
    package versions and hardware of the latest attempt (``validate.identity``).
    ``engine`` is the engine kind, ``engine_identity`` its plan settings that change
    responses (preset or checkpoint, dtype, overrides, model, server flags, ...).
    """

    run_id: int
    run_ids: tuple[int, ...]
    plan_name: str
    plan_hash: str
    git: str | None
    started_at: float | None
    finished_at: float | None
    status: str
    identity: Mapping[str, Any]
    seeds: tuple[int, ...]
    engine: str
    baseline: str
    warm: bool = False
    engine_identity: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class VariantSummary(_ToDict):
    """One variant on one task: accuracy on the gated metric, health, speed, fidelity.

    ``accuracy`` is None when no row was scored (the variant is then INVALID).
    ``health`` are the variant's own facts; the pair health the gate judged is on the
    ``ComparisonRow``.
    """

    variant: str
    task: str
    metric: str
    n: int
    accuracy: AccuracyEstimate | None
    health: VariantHealth
    speed: SpeedSummary | None = None
    fidelity: FidelitySummary | None = None
    prefix_hit_rate: float | None = None
    is_baseline: bool = False

    def to_dict(self) -> dict:
        d = super().to_dict()
        if self.accuracy is not None:
            d["accuracy"] = _plain(asdict(self.accuracy)) | {"se": json_safe(self.accuracy.se)}
        return d


@dataclass(frozen=True)
class ComparisonRow(_ToDict):
    """A non-baseline variant against the baseline on one task.

    ``comparison`` is None when the pair could not be compared (no paired rows); then
    ``verdict`` is INVALID with its reasons. ``verdict`` is None when the plan has no
    gate policy for this task. ``health`` is the pair's HealthReport the gate judged and
    ``health_failures`` why it is INVALID (empty when healthy). ``flips_to_wrong`` are
    ``item_id#repeat`` rows right under the baseline and wrong under the variant.
    ``engagement``: the expected optimizations' engagement counts on the paired rows and
    the paired delta broken down by engagement and by prompt length (the ledger's view).
    ``noise_floor``: with an A/A copy of the baseline in the plan, its flip rate and KL
    beside this pair's and the test of A/B > A/A discordance.
    """

    variant: str
    task: str
    metric: str
    comparison: MetricComparison | None
    verdict: TaskVerdict | None
    health: HealthReport
    health_failures: tuple[str, ...] = ()
    speedups: tuple[Speedup, ...] = ()
    flips_to_wrong: tuple[str, ...] = ()
    flips_to_right: tuple[str, ...] = ()
    engagement: Any = None  # validate.analysis.engagement.PairEngagement (None: unpaired)
    noise_floor: Any = None  # validate.analysis.noise_floor.NoiseFloor (None: no A/A run)

    @property
    def status(self) -> str:
        """The verdict's word, or INVALID when unhealthy, or NOT-GATED."""
        if self.verdict is not None:
            return self.verdict.verdict
        return INVALID if self.health_failures or self.comparison is None else "NOT-GATED"

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["status"] = self.status
        return d


@dataclass(frozen=True)
class PolicySummary(_ToDict):
    source: str
    alpha: float
    power: float
    correction: str
    mode: str
    equivalence: bool
    margins: Mapping[str, float]  # task -> margin (fraction)
    tiers: Mapping[str, str]
    metrics: Mapping[str, str]  # task -> metric gated
    family_size: int  # (variant, task) hypotheses adjusted together


@dataclass(frozen=True)
class HeadlineSection(_ToDict):
    """The two headline operating points of every swept variant (baseline first) and
    their ratios vs the baseline, recomputed from the stored sweeps (the plan's
    ``[speed]`` table). Element types live in ``validate.speed`` (``Headline``,
    ``HeadlineComparison``, ``SweepPoint``), which imports this module, hence ``Any``.
    ``points`` holds every measured level per variant, so a reader sees where the
    per-user rate fell below the target."""

    settings: Mapping[str, Any]
    target_tokens_per_s_per_user: float
    user_quantile: float
    headlines: tuple[Any, ...]
    comparisons: tuple[Any, ...]
    points: Mapping[str, tuple[Any, ...]]


@dataclass(frozen=True)
class RunAnalysis(_ToDict):
    """The whole analysed run. ``decision`` is over every (variant, task) in one family;
    ``variant_decisions`` says the same per optimization (an ablation reads these).
    ``variant_configs`` is what each variant is (runtime options, normalised; server
    flags or endpoint), as stored with the run. ``headline`` is None when the plan has no
    ``[speed]`` table (no sweep was measured). ``caveats`` say what the run's intervals
    do not cover (the speed CIs' scope), printed by every report format. ``interleaved``:
    speed-ups from the plan's interleaved rounds (``[speed] rounds``), empty without."""

    identity: RunIdentity
    policy: PolicySummary | None
    tasks: tuple[str, ...]
    variants: tuple[str, ...]
    summaries: tuple[VariantSummary, ...]
    comparisons: tuple[ComparisonRow, ...]
    decision: str
    variant_decisions: Mapping[str, str] = field(default_factory=dict)
    floor_tasks: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    chance: Mapping[str, float] = field(default_factory=dict)  # task -> accuracy of guessing
    variant_configs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    headline: HeadlineSection | None = None
    caveats: tuple[str, ...] = ()
    interleaved: tuple[Any, ...] = ()  # validate.analysis.interleaved.InterleavedSpeed

    @property
    def exit_code(self) -> int:
        return DECISION_EXIT_CODES[self.decision]

    def summary(self, variant: str, task: str) -> VariantSummary:
        for s in self.summaries:
            if (s.variant, s.task) == (variant, task):
                return s
        raise KeyError(f"no summary for variant {variant!r} on task {task!r}")

    def comparison(self, variant: str, task: str) -> ComparisonRow:
        for c in self.comparisons:
            if (c.variant, c.task) == (variant, task):
                return c
        raise KeyError(f"no comparison for variant {variant!r} on task {task!r}")

    def to_dict(self) -> dict:
        return super().to_dict() | {"exit_code": self.exit_code, "schema": "v41val.analysis/1"}
