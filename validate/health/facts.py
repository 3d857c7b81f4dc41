"""Health facts of stored runs, computed before any statistics.

A broken variant (items missing, a parser that stopped matching, empty outputs, answers
cut at ``max_gen_toks``, outputs suddenly much longer or shorter) is INVALID, not "a
large regression": its accuracy says nothing about the optimization. These functions
measure; ``validate.gate.health`` judges against the policy's thresholds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from validate.gate.health import HealthReport
from validate.stats.jsonable import json_safe
from validate.store import ItemOutcome, OutcomeTable


@dataclass(frozen=True)
class VariantHealth:
    """Health facts of one (variant, task) for one metric.

    Rates are over responded rows (None when none responded, or when not applicable:
    empty, truncation and length are for generate tasks only). ``missing`` lists the
    planned ``item_id#repeat`` rows without a response (never dropped silently);
    ``failed`` those of them whose last attempt recorded an engine error. Empty means
    zero output characters.
    """

    planned: int
    responded: int
    missing: tuple[str, ...]
    failed: tuple[str, ...]
    invalid_rate: float | None
    empty_rate: float | None
    truncated_rate: float | None
    mean_output_chars: float | None
    mean_output_tokens: float | None
    max_gen_toks: int | None = None

    @property
    def coverage(self) -> float:
        return self.responded / self.planned if self.planned else 0.0

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        return json_safe(d | {"coverage": self.coverage})


def row_label(row: ItemOutcome) -> str:
    return f"{row.item_id}#{row.repeat}"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _rate(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def is_truncated(row: ItemOutcome, max_gen_toks: int | None) -> bool:
    if row.finish_reason == "length":
        return True
    return (max_gen_toks is not None and row.n_output_tokens is not None
            and row.n_output_tokens >= max_gen_toks)


def variant_health(table: OutcomeTable, metric: str, generate: bool,
                   max_gen_toks: int | None = None) -> VariantHealth:
    """Facts of one stored (variant, task); ``generate`` False for multiple choice."""
    answered = [r for r in table.rows if r.responded]
    missing = tuple(row_label(r) for r in table.rows if not r.responded)
    failed = tuple(row_label(r) for r in table.rows if not r.responded and r.failed)
    scored = [r for r in answered if metric in r.invalid]
    chars = [float(r.output_chars) for r in answered if r.output_chars is not None]
    tokens = [float(r.n_output_tokens) for r in answered if r.n_output_tokens is not None]
    return VariantHealth(
        planned=len(table.rows), responded=len(answered), missing=missing, failed=failed,
        invalid_rate=_rate([r.invalid[metric] for r in scored]),
        empty_rate=_rate([r.output_chars == 0 for r in answered]) if generate else None,
        truncated_rate=(_rate([is_truncated(r, max_gen_toks) for r in answered])
                        if generate else None),
        mean_output_chars=_mean(chars) if generate else None,
        mean_output_tokens=_mean(tokens) if generate else None,
        max_gen_toks=max_gen_toks,
    )


def paired_coverage(base: OutcomeTable, cand: OutcomeTable, metric: str) -> float:
    """Share of the planned (item, repeat) rows of either variant that both answered
    and were scored on ``metric``: the rows a paired statistic can use. A baseline
    that lost items lowers it as much as a candidate that did."""
    def scored(table: OutcomeTable) -> set[tuple[str, int]]:
        return {(r.item_id, r.repeat) for r in table.rows if r.responded and metric in r.scores}

    planned = {(r.item_id, r.repeat) for r in (*base.rows, *cand.rows)}
    return len(scored(base) & scored(cand)) / len(planned) if planned else 0.0


def discordant(base: OutcomeTable, cand: OutcomeTable,
               flag: Callable[[ItemOutcome], bool | None]) -> tuple[int, int] | None:
    """(rows flagged in the baseline only, rows flagged in the candidate only) over the
    (item, repeat) rows both answered where ``flag`` applies (not None); the counts of the
    gate's paired test of a rate check. None when no row applies."""
    flags_a = {(r.item_id, r.repeat): flag(r) for r in base.rows if r.responded}
    pairs = [(flags_a[(r.item_id, r.repeat)], flag(r)) for r in cand.rows
             if r.responded and (r.item_id, r.repeat) in flags_a]
    pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
    if not pairs:
        return None
    return sum(a and not b for a, b in pairs), sum(b and not a for a, b in pairs)


def pair_health(base: OutcomeTable, cand: OutcomeTable, metric: str, base_facts: VariantHealth,
                cand_facts: VariantHealth) -> HealthReport:
    """The gate's HealthReport of candidate vs baseline on one task, with the item-level
    counts of each rate check that applies (generate tasks: empty and truncated too)."""
    generate = base_facts.empty_rate is not None and cand_facts.empty_rate is not None
    limit = base_facts.max_gen_toks
    counts = {
        "invalid_discordant": discordant(
            base, cand, lambda r: r.invalid.get(metric)),
        "empty_discordant": discordant(base, cand, lambda r: r.output_chars == 0)
        if generate else None,
        "truncated_discordant": discordant(base, cand, lambda r: is_truncated(r, limit))
        if generate else None,
    }
    ratio = None
    a, b = base_facts.mean_output_chars, cand_facts.mean_output_chars
    if a is not None and b is not None and a > 0:
        ratio = b / a
    return HealthReport(
        coverage=paired_coverage(base, cand, metric),
        invalid_rate_a=base_facts.invalid_rate, invalid_rate_b=cand_facts.invalid_rate,
        empty_rate_a=base_facts.empty_rate, empty_rate_b=cand_facts.empty_rate,
        length_ratio=ratio,
        truncated_rate_a=base_facts.truncated_rate, truncated_rate_b=cand_facts.truncated_rate,
        source=f"results store, plan {base.plan_hash[:12]}: {cand.variant} vs {base.variant}",
        **counts,
    )
