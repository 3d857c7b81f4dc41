"""Compare two variants from per-item outcome tables of any source.

A source (lm-eval sample files today, the results store later) only has to provide a
mapping ``(task, metric) -> ItemOutcomes`` per variant. ``compare_tables`` pairs the
common (task, metric) keys and computes, per key, both variants' accuracy and the
paired statistics (``compare_binary`` for 0/1 scores, ``compare_continuous``
otherwise). It never reads files and never decides anything; the gate does that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

from validate.errors import PairingError
from validate.stats.bootstrap import BootstrapSpec
from validate.stats.continuous import PairedMeanDifference, compare_continuous
from validate.stats.outcomes import ItemOutcomes, PairedOutcomes, pair_outcomes
from validate.stats.paired import PairedComparison, compare_binary
from validate.stats.proportions import AccuracyEstimate, estimate_accuracy

Key = tuple[str, str]


@dataclass(frozen=True, eq=False)
class MetricComparison:
    task: str
    metric: str
    accuracy_a: AccuracyEstimate
    accuracy_b: AccuracyEstimate
    paired: PairedComparison | PairedMeanDifference
    outcomes: PairedOutcomes

    @property
    def coverage(self) -> float:
        return self.outcomes.coverage

    def to_dict(self) -> dict:
        stats = asdict(self.paired)
        stats["test"] = self.paired.test
        return {
            "task": self.task,
            "metric": self.metric,
            "a": asdict(self.accuracy_a) | {"se": self.accuracy_a.se},
            "b": asdict(self.accuracy_b) | {"se": self.accuracy_b.se},
            "paired": stats,
            "coverage": self.coverage,
            "only_in_a": list(self.outcomes.only_in_a),
            "only_in_b": list(self.outcomes.only_in_b),
        }

    def report(self) -> str:
        lines = [self.accuracy_a.report(), self.accuracy_b.report(), self.paired.report()]
        if self.outcomes.only_in_a or self.outcomes.only_in_b:
            lines.append(
                f"  unpaired rows: {len(self.outcomes.only_in_a)} only in A, "
                f"{len(self.outcomes.only_in_b)} only in B (coverage {100 * self.coverage:.2f} %)"
            )
        return "\n".join(lines)


@dataclass(frozen=True, eq=False)
class RunComparison:
    label_a: str
    label_b: str
    rows: tuple[MetricComparison, ...]
    only_in_a: tuple[Key, ...] = ()  # (task, metric) tables the other variant lacks
    only_in_b: tuple[Key, ...] = ()

    def row(self, task: str, metric: str) -> MetricComparison:
        for r in self.rows:
            if (r.task, r.metric) == (task, metric):
                return r
        raise PairingError(f"no comparison for {task}/{metric}")

    def metrics_of(self, task: str) -> list[str]:
        return [r.metric for r in self.rows if r.task == task]

    def to_dict(self) -> dict:
        return {
            "a": self.label_a,
            "b": self.label_b,
            "comparisons": [r.to_dict() for r in self.rows],
            "only_in_a": [list(k) for k in self.only_in_a],
            "only_in_b": [list(k) for k in self.only_in_b],
        }

    def report(self) -> str:
        text = "\n\n".join(r.report() for r in self.rows)
        for label, keys in ((self.label_a, self.only_in_a), (self.label_b, self.only_in_b)):
            if keys:
                names = ", ".join(f"{t}/{m}" for t, m in keys)
                text += f"\n\nnot compared, only in {label}: {names}"
        return text


def _accuracy(table: ItemOutcomes, alpha: float, label: str) -> AccuracyEstimate:
    """A variant's accuracy over *all* its rows (what lm-eval reports), not only the
    paired ones; with full coverage the two are the same."""
    ids = list(table.item_ids)
    return estimate_accuracy(table.values, ids, alpha, label, table.task, table.metric)


def compare_tables(
    tables_a: Mapping[Key, ItemOutcomes],
    tables_b: Mapping[Key, ItemOutcomes],
    label_a: str = "A",
    label_b: str = "B",
    task: str | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
    bootstrap: BootstrapSpec | None = None,
) -> RunComparison:
    """Pair and compare every (task, metric) both variants have (optionally one task)."""
    keys = sorted(set(tables_a) & set(tables_b))
    if task is not None:
        keys = [k for k in keys if k[0] == task]
    if not keys:
        which = f" for task {task!r}" if task else ""
        raise PairingError(
            f"{label_a} and {label_b} have no (task, metric) in common{which} "
            f"(A: {sorted({k[0] for k in tables_a})}, B: {sorted({k[0] for k in tables_b})})"
        )
    rows = []
    for key in keys:
        paired = pair_outcomes(tables_a[key], tables_b[key])
        acc_a = _accuracy(tables_a[key], alpha, label_a)
        acc_b = _accuracy(tables_b[key], alpha, label_b)
        if paired.is_binary:
            stats = compare_binary(paired, alpha, power, bootstrap)
        else:
            stats = compare_continuous(paired, alpha, bootstrap)
        rows.append(MetricComparison(key[0], key[1], acc_a, acc_b, stats, paired))
    def unmatched(mine, theirs) -> tuple[Key, ...]:
        return tuple(k for k in sorted(set(mine) - set(theirs)) if task is None or k[0] == task)

    return RunComparison(
        label_a=label_a, label_b=label_b, rows=tuple(rows),
        only_in_a=unmatched(tables_a, tables_b), only_in_b=unmatched(tables_b, tables_a),
    )
