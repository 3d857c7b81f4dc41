"""The gate policy: which tasks, what margin, what alpha, which correction, which mode.

A TOML file, validated strictly (unknown keys and wrong types are errors naming the
file and the field, never silently ignored: a typo in ``margni`` must not turn into a
default margin):

    [gate]
    alpha = 0.05            # one-sided, per claim before the family correction
    power = 0.8             # used for "n that would decide" on INCONCLUSIVE
    correction = "holm"     # "holm" | "bonferroni" | "none"
    mode = "standard"       # "standard" | "prove-safe" (anything but PASS is NO-GO)
    equivalence = false     # TOST: also require delta < +margin

    [health]                # optional; defaults shown (validate.gate.health says why)
    min_coverage = 1.0
    max_invalid_rate_increase = 0.02    # rate checks: the practical minimum rise ...
    max_empty_rate_increase = 0.01
    max_truncated_rate_increase = 0.05
    alpha = 0.001                       # ... and the false-alarm rate of each check's test
    max_length_ratio = 1.5
    min_length_ratio = 0.5

    [engagement]            # optional (validate.gate.engagement says why)
    min_fraction = 0.9      # each expected optimization engaged on >= 90 % of items

    [tasks.gsm8k_local]     # key = the task name in the outcome files
    margin = 1.5            # accuracy points (1.5 = 0.015)
    tier = "critical"       # "critical" (decides) | "advisory" (reported only)
    metric = "exact_match,flexible-extract"   # optional when the task has one metric
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from validate.errors import PolicyError
from validate.gate.engagement import EngagementPolicy
from validate.gate.health import HealthThresholds
from validate.gate_limits import CORRECTIONS, MAX_MARGIN_POINTS, gate_alpha_problem
from validate.tomlfile import read_toml

MODES = ("standard", "prove-safe")
TIERS = ("critical", "advisory")


@dataclass(frozen=True)
class TaskPolicy:
    task: str
    margin: float  # fraction (points / 100)
    tier: str = "critical"
    metric: str | None = None

    @property
    def margin_points(self) -> float:
        return 100.0 * self.margin


@dataclass(frozen=True)
class GatePolicy:
    tasks: tuple[TaskPolicy, ...]
    alpha: float = 0.05
    power: float = 0.8
    correction: str = "holm"
    mode: str = "standard"
    equivalence: bool = False
    health: HealthThresholds = field(default_factory=HealthThresholds)
    source: str = "<inline>"
    engagement: EngagementPolicy = field(default_factory=EngagementPolicy)

    def __post_init__(self) -> None:
        where = self.source
        problem = gate_alpha_problem(self.alpha)
        if problem:
            raise PolicyError(f"{where}: gate.alpha: {problem}")
        if not 0.0 < self.power < 1.0:
            raise PolicyError(f"{where}: gate.power: expected a number in (0, 1), got {self.power}")
        if self.correction not in CORRECTIONS:
            raise PolicyError(
                f"{where}: gate.correction: expected one of {', '.join(CORRECTIONS)}, "
                f"got {self.correction!r}"
            )
        if self.mode not in MODES:
            raise PolicyError(
                f"{where}: gate.mode: expected one of {', '.join(MODES)}, got {self.mode!r}"
            )
        if not self.tasks:
            raise PolicyError(f"{where}: tasks: expected at least one [tasks.<name>] table")

    def task(self, name: str) -> TaskPolicy:
        for t in self.tasks:
            if t.task == name:
                return t
        raise PolicyError(f"{self.source}: tasks: no policy for task {name!r}")


def _number(value: Any, where: str, low: float, high: float, open_low: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PolicyError(f"{where}: expected a number, got {value!r}")
    ok_low = value > low if open_low else value >= low
    if not (ok_low and value <= high):
        bracket = "(" if open_low else "["
        raise PolicyError(f"{where}: expected a number in {bracket}{low}, {high}], got {value}")
    return float(value)


def _alpha(value: Any, where: str) -> float:
    """The gate's alpha: a number (here) in GATE_ALPHA_RANGE (``gate_alpha_problem``,
    the wording ``v41val plan --alpha`` gives too)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PolicyError(f"{where}: expected a number, got {value!r}")
    problem = gate_alpha_problem(float(value))
    if problem:
        raise PolicyError(f"{where}: {problem}")
    return float(value)


def _choice(value: Any, where: str, options: tuple[str, ...]) -> str:
    if value not in options:
        raise PolicyError(f"{where}: expected one of {', '.join(options)}, got {value!r}")
    return value


def _no_unknown(table: dict, allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise PolicyError(
            f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})"
        )


def _table(doc: dict, key: str, where: str) -> dict:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise PolicyError(f"{where}: {key}: expected a table, got {type(value).__name__}")
    return value


def _parse_task(name: str, table: Any, src: str) -> TaskPolicy:
    where = f"{src}: tasks.{name}"
    if not isinstance(table, dict):
        raise PolicyError(f"{where}: expected a table with margin and tier")
    _no_unknown(table, {"margin", "tier", "metric"}, where)
    if "margin" not in table:
        raise PolicyError(f"{where}.margin: missing (the non-inferiority margin in points)")
    margin = _number(table["margin"], f"{where}.margin", 0.0, MAX_MARGIN_POINTS) / 100.0
    tier = _choice(table.get("tier", "critical"), f"{where}.tier", TIERS)
    metric = table.get("metric")
    if metric is not None and (not isinstance(metric, str) or not metric):
        raise PolicyError(f"{where}.metric: expected a non-empty string, got {metric!r}")
    return TaskPolicy(task=name, margin=margin, tier=tier, metric=metric)


def _parse_health(table: dict, src: str) -> HealthThresholds:
    where = f"{src}: health"
    names = {f.name for f in fields(HealthThresholds)}
    _no_unknown(table, names, where)
    values = {}
    for key, value in table.items():
        high = 100.0 if key.endswith("length_ratio") else 1.0
        # alpha = 0 would switch the rate checks off silently: (0, 1], 1 = fixed thresholds
        values[key] = _number(value, f"{where}.{key}", 0.0, high, open_low=key == "alpha")
    limits = HealthThresholds(**values)
    if limits.min_length_ratio > limits.max_length_ratio:
        raise PolicyError(f"{where}: min_length_ratio exceeds max_length_ratio")
    return limits


def _parse_engagement(table: dict, src: str) -> EngagementPolicy:
    where = f"{src}: engagement"
    _no_unknown(table, {"min_fraction"}, where)
    if "min_fraction" not in table:
        return EngagementPolicy()
    return EngagementPolicy(min_fraction=_number(table["min_fraction"],
                                                 f"{where}.min_fraction", 0.0, 1.0))


def parse_policy(doc: dict, source: str = "<inline>") -> GatePolicy:
    """Validate a parsed TOML document into a ``GatePolicy``."""
    _no_unknown(doc, {"gate", "health", "tasks", "engagement"}, source)
    gate = _table(doc, "gate", source)
    _no_unknown(gate, {"alpha", "power", "correction", "mode", "equivalence"}, f"{source}: gate")
    equivalence = gate.get("equivalence", False)
    if not isinstance(equivalence, bool):
        raise PolicyError(f"{source}: gate.equivalence: expected true or false, got {equivalence!r}")
    tasks_table = _table(doc, "tasks", source)
    tasks = tuple(_parse_task(name, t, source) for name, t in tasks_table.items())
    return GatePolicy(
        tasks=tasks,
        alpha=_alpha(gate.get("alpha", 0.05), f"{source}: gate.alpha"),
        power=_number(gate.get("power", 0.8), f"{source}: gate.power", 0.0, 0.999),
        correction=_choice(gate.get("correction", "holm"), f"{source}: gate.correction", CORRECTIONS),
        mode=_choice(gate.get("mode", "standard"), f"{source}: gate.mode", MODES),
        equivalence=equivalence,
        health=_parse_health(_table(doc, "health", source), source),
        source=source,
        engagement=_parse_engagement(_table(doc, "engagement", source), source),
    )


def load_policy(path: str | Path) -> GatePolicy:
    """Read and validate a policy file; ``PolicyError`` (exit 2) on any problem."""
    return parse_policy(read_toml(path, PolicyError, "policy file"), str(path))
