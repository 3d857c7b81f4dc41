"""Plan file -> run (or resume) -> analysis: what ``v41val run`` does, as a library call."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from validate.analysis.build import analyze_run
from validate.analysis.model import RunAnalysis
from validate.defaults import RUN_WORKSPACE, STORE_NAME
from validate.plan import Plan, load_plan
from validate.plan import ablate as ablate_plan
from validate.progress import QUIET, Progress
from validate.runner.engines import check_engines, factory_for
from validate.runner.run import RunOutcome, run_plan
from validate.store import ResultsStore
from validate.userpaths import ensure_directory

DEFAULT_WORKSPACE = RUN_WORKSPACE


@dataclass(frozen=True)
class Execution:
    outcome: RunOutcome
    analysis: RunAnalysis
    store_path: Path

    def execution_dict(self) -> dict:
        """What this execution did: the store, the run, and per variant what was
        already stored, sent, stored and failed."""
        o = self.outcome
        return {"store": str(self.store_path), "run_id": o.run.run_id, "plan_hash": o.plan_hash,
                "scored": o.scored, "swept": list(o.swept),
                "variants": [vars(v) for v in o.variants]}



def prepare(plan_path: str | Path, *, ablate: bool = False) -> Plan:
    """Load (and with ``ablate`` expand) a plan; every input error surfaces here. The
    ablation keeps only the fused ops that run fused on the plan's device
    (``validate.runner.preview.ablation_fused``, which also says why others are out)."""
    plan = load_plan(plan_path)
    if not ablate:
        return plan
    if plan.engine.kind != "builtin":
        return ablate_plan(plan)  # refuses it in one line, before any device probing
    from validate.runner.preview import ablation_fused

    return ablate_plan(plan, ablation_fused(plan).ops)


def execute(plan: Plan, *, workspace: str | Path | None = None,
            progress: Progress = QUIET) -> Execution:
    """Run (or resume) ``plan`` in ``workspace``'s store, then analyse it."""
    workspace = Path(workspace) if workspace is not None else DEFAULT_WORKSPACE
    factory = factory_for(plan, workspace)
    check_engines(plan, factory)  # every input checked before anything is written
    ensure_directory(workspace, "--workspace")
    store_path = workspace / STORE_NAME
    with ResultsStore.open(store_path) as store:
        outcome = run_plan(plan, store, workspace=workspace, factory=factory,
                           progress=progress)
        with progress.bar("analysis", None):
            analysis = analyze_run(store, plan.hash)
    return Execution(outcome, analysis, store_path)
