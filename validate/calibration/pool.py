"""The calibration's item pool: every planted variant run once on the task's items.

The run is an ordinary plan (``validate.plan``) executed by ``validate.runner.run_plan``
into a results store, so nothing here re-implements serving: warm mode primes every
prompt first (the builtin engine does it itself) so encoder-side replay engages on the
prefix hits, responses are stored before they are scored by the task's own scorer, and
a rerun with the same workspace resumes instead of recomputing. Greedy decoding (the
task's own generation parameters), one row per item, the fidelity pass off.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from validate.calibration.planted import EXACT, PlantedLevels
from validate.defaults import STORE_NAME
from validate.progress import QUIET, Progress
from validate.store import OutcomeTable
from validate.userpaths import ensure_directory


def calibration_plan_document(engine: Mapping[str, Any], levels: PlantedLevels, task: str,
                              limit: int | None, *, max_gen_toks: int | None = None,
                              seed: int = 1234, concurrency: int = 8) -> dict:
    """The plan (as a TOML-shaped document) that runs every planted variant."""
    spec: dict[str, Any] = {"name": task}
    if limit is not None:
        spec["limit"] = int(limit)
    if max_gen_toks is not None:
        spec["max_gen_toks"] = int(max_gen_toks)
    return {
        "name": "calibrate-quality",
        "description": "v41val calibrate --quality: planted degradations vs exact",
        "baseline": EXACT, "seed": int(seed), "concurrency": int(concurrency), "warm": True,
        "fidelity_prompts": 0,
        "engine": {"kind": "builtin", **dict(engine)},
        "variants": {v.name: v.table() for v in levels.variants},
        "tasks": [spec],
    }


@dataclass(frozen=True)
class VariantPool:
    """One variant's stored rows and what the run says about it."""

    name: str
    table: OutcomeTable
    prefix_hit_rate: float | None  # share of requests that hit the prefix cache
    @property
    def missing(self) -> int:
        """Planned rows without a stored response (engine failures)."""
        return sum(not r.responded for r in self.table.rows)

    def to_dict(self) -> dict:
        return {"name": self.name, "rows": len(self.table.rows),
                "prefix_hit_rate": self.prefix_hit_rate, "missing": self.missing}


@dataclass(frozen=True)
class QualityPool:
    task: str
    metric: str
    max_gen_toks: int | None
    plan_hash: str
    store: str
    variants: Mapping[str, VariantPool]

    @property
    def n_items(self) -> int:
        return len(next(iter(self.variants.values())).table.rows)


def run_pool(document: Mapping[str, Any], workspace: Path, metric: str | None = None,
             progress: Progress = QUIET) -> QualityPool:
    """Run (or resume) the calibration plan in ``workspace`` and read back its tables.
    ``progress`` shows the runner's phases (priming, quality, per variant)."""
    import tasks as registry
    from validate.analysis.source import choose_metric
    from validate.analysis.speed import prefix_hit_rate
    from validate.plan import parse_plan
    from validate.runner import run_plan
    from validate.store import ResultsStore

    plan = parse_plan(dict(document), source="<calibrate --quality>")
    spec = plan.tasks[0]
    budget = registry.info(spec.name, max_gen_toks=spec.max_gen_toks).max_gen_toks
    ensure_directory(workspace, "--workspace")
    with ResultsStore.open(workspace / STORE_NAME) as store:
        run_plan(plan, store, workspace=workspace, progress=progress)
        tables = {v: store.outcomes(plan.hash, v, spec.name) for v in plan.variant_names}
        chosen = choose_metric(spec.name, list(tables.values()), metric)
        variants = {v: VariantPool(v, tables[v],
                                   prefix_hit_rate(store.timings(plan.hash, v, spec.name)))
                    for v in plan.variant_names}
    return QualityPool(spec.name, chosen, budget, plan.hash, str(workspace / STORE_NAME),
                       variants)
