"""What the analysis reads from a store: which plan, its stored description, its
variants, tasks and metrics (from the plan stored with the run when there is one,
else from what the store holds, e.g. an lm-eval import)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from validate.errors import ValidateInputError
from validate.store import OutcomeTable, ResultsStore, RunInfo


class RunNotFound(ValidateInputError, LookupError):
    """No run in the store matches the run id or plan hash asked for."""


@dataclass(frozen=True)
class StoredPlan:
    plan_hash: str
    runs: tuple[RunInfo, ...]
    doc: Mapping[str, Any]  # the plan as stored with its latest run ({} if none)
    baseline: str
    variants: tuple[str, ...]  # baseline first
    tasks: tuple[str, ...]


def _plan_doc(store: ResultsStore, run_id: int) -> dict:
    # the store keeps the plan JSON with each run; RunInfo does not carry it
    text = store._read(lambda conn: conn.execute(  # noqa: SLF001
        "SELECT plan_json FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0])
    return json.loads(text) if text else {}


def resolve_plan_hash(store: ResultsStore, run: str | int | None) -> str:
    """A run id (int or digits), a plan hash or a unique prefix of one, or None for
    the latest run in the store."""
    runs = store.runs()
    if not runs:
        raise RunNotFound(f"{store.path}: the store holds no runs")
    if run is None:
        return runs[-1].plan_hash
    text = str(run)
    if text.isdigit():
        for r in runs:
            if r.run_id == int(text):
                return r.plan_hash
    hashes = sorted({r.plan_hash for r in runs if r.plan_hash.startswith(text)})
    if len(hashes) == 1:
        return hashes[0]
    known = ", ".join(f"{r.run_id}:{r.plan_hash[:12]}" for r in runs[-10:])
    what = "several plans" if hashes else "no run"
    raise RunNotFound(f"{store.path}: {what} match {text!r} (runs: {known})")


def stored_plan(store: ResultsStore, plan_hash: str, baseline: str | None = None) -> StoredPlan:
    runs = tuple(store.runs(plan_hash))
    if not runs:
        raise RunNotFound(f"{store.path}: no run of plan {plan_hash[:12]}")
    doc = _plan_doc(store, runs[-1].run_id)
    stored_variants = store.variants(plan_hash)
    cells = store.cells(plan_hash)
    names = [v.name for v in stored_variants] or sorted({v for v, _ in cells})
    if doc.get("variants"):
        names = [n for n in doc["variants"] if n in names] or list(doc["variants"])
    base = baseline or doc.get("baseline") or next(
        (v.name for v in stored_variants if v.is_baseline), None)
    if base is None or base not in names:
        raise RunNotFound(f"{store.path}: plan {plan_hash[:12]} has no baseline variant "
                          f"{base!r} (variants: {', '.join(names)})")
    tasks = [t["name"] for t in doc.get("tasks", [])] or sorted({t for _, t in cells})
    return StoredPlan(plan_hash, runs, doc, base, (base, *[n for n in names if n != base]),
                      tuple(tasks))


def scored_rows(table: OutcomeTable, metric: str):
    """Rows answered and scored on ``metric`` (the rows statistics use)."""
    return [r for r in table.rows if r.responded and metric in r.scores]


def choose_metric(task: str, tables: list[OutcomeTable], wanted: str | None) -> str:
    """The policy's metric, else the registered task's primary, else the only one."""
    available = sorted({f for t in tables for f in t.filters})
    if wanted is not None:
        return wanted
    import tasks as registry

    if task in registry.names():
        from validate.scoring import primary_metric

        primary = primary_metric(registry.info(task))
        if primary in available or not available:
            return primary
    if len(available) == 1:
        return available[0]
    flexible = [m for m in available if m.endswith("flexible-extract")]
    if flexible:
        return flexible[0]
    if not available:
        return ""
    return available[0]
