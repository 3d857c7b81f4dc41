"""Paired statistics for A/B comparisons of inference variants (engine-independent, pure).

Public API (every result is a frozen dataclass with ``report()``):
- outcome tables: ``ItemOutcomes``, ``PairedOutcomes``, ``pair_outcomes``
- one variant: ``estimate_accuracy`` -> ``AccuracyEstimate``
- two variants, 0/1 outcomes: ``compare_binary`` -> ``PairedComparison``
- two variants, continuous: ``compare_continuous`` -> ``PairedMeanDifference``,
  ``ratio_of_means``, ``ratio_of_medians`` -> ``RatioEstimate``
- any outcome source, all (task, metric): ``compare_tables`` -> ``RunComparison``
- families: ``adjust`` (holm / bonferroni / none)
- planning: ``plan_noninferiority``, ``plan_from_aa`` -> ``PowerPlan``; ``plan_family``
  (every task of a gate family, ``ClaimSpec``) -> ``FamilyPlan``; ``task_size``
- the gate's test: ``score_interval`` (Tango's score test for paired proportions)
"""

from validate.stats.bootstrap import BootstrapSpec
from validate.stats.compare import MetricComparison, RunComparison, compare_tables
from validate.stats.continuous import (
    PairedMeanDifference,
    RatioEstimate,
    compare_continuous,
    ratio_of_means,
    ratio_of_medians,
)
from validate.stats.multiplicity import CORRECTIONS, adjust, bonferroni, holm
from validate.stats.outcomes import ItemOutcomes, PairedOutcomes, pair_outcomes
from validate.stats.paired import DiscordanceTable, PairedComparison, compare_binary
from validate.stats.planning import (
    ClaimSpec,
    FamilyPlan,
    PowerPlan,
    plan_family,
    plan_from_aa,
    plan_noninferiority,
)
from validate.stats.proportions import AccuracyEstimate, estimate_accuracy
from validate.stats.task_sizes import task_size

__all__ = [
    "CORRECTIONS",
    "AccuracyEstimate",
    "BootstrapSpec",
    "ClaimSpec",
    "DiscordanceTable",
    "FamilyPlan",
    "ItemOutcomes",
    "MetricComparison",
    "PairedComparison",
    "PairedMeanDifference",
    "PairedOutcomes",
    "PowerPlan",
    "RatioEstimate",
    "RunComparison",
    "adjust",
    "bonferroni",
    "compare_binary",
    "compare_continuous",
    "compare_tables",
    "estimate_accuracy",
    "holm",
    "pair_outcomes",
    "plan_family",
    "plan_from_aa",
    "plan_noninferiority",
    "ratio_of_means",
    "ratio_of_medians",
    "task_size",
]
