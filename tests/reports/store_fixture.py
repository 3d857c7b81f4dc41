"""Fill a real results store (validate.store) with plans whose outcomes and timings are
known by construction: the input of the history tests and of the end-to-end report
tests (which run the real ``analyze_run`` on it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tasks.request import Generation, GenerationParams, Request
from validate.engines.base import Timings
from validate.store import PlannedRequest, ResponseRecord, ResultsStore, ScoreRecord

GEN = GenerationParams(max_gen_toks=64, until=("\n\n",), seed=1)
FILTER = "flexible-extract"
SECRET_PROMPT = "QUESTION-TEXT-THAT-MUST-NOT-LEAK {item}"


@dataclass(frozen=True)
class PlanSpec:
    """One plan hash: per variant its 0/1 outcomes on items 0..n-1 of ``task`` and a
    constant TTFT / per-token time (so speeds are known exactly)."""

    plan_hash: str
    outcomes: Mapping[str, Sequence[float]]  # variant -> outcomes, baseline first
    plan_name: str = "nightly"
    task: str = "mini_math"
    ttft_s: Mapping[str, float] = field(default_factory=dict)
    tpot_s: Mapping[str, float] = field(default_factory=dict)
    n_output_tokens: int = 11
    policy: Mapping | None = None
    item_prefix: str = "mini"


def item_id(prefix: str, i: int) -> str:
    return f"{prefix}-{i:03d}"


def add_plan(store: ResultsStore, spec: PlanSpec) -> int:
    variants = list(spec.outcomes)
    doc = {"name": spec.plan_name, "tasks": [{"name": spec.task}], "variants": variants,
           "baseline": variants[0], "engine": {"kind": "builtin"}}
    if spec.policy is not None:
        doc["policy"] = dict(spec.policy)
    run = store.begin_run(spec.plan_hash, plan_name=spec.plan_name, seeds=(1,), plan=doc,
                          identity={"git": "cafe" + spec.plan_hash[:6], "torch": "2.13.0"})
    t0 = run.started_at
    for v_index, (variant, values) in enumerate(spec.outcomes.items()):
        store.put_variant(run, variant, {"name": variant}, is_baseline=v_index == 0)
        ttft = spec.ttft_s.get(variant, 0.2)
        tpot = spec.tpot_s.get(variant, 0.01)
        batch = []
        for i, value in enumerate(values):
            iid = item_id(spec.item_prefix, i)
            req = Request(task=spec.task, item_id=iid, kind="generate",
                          prompt=SECRET_PROMPT.format(item=iid), gen=GEN)
            e2e = ttft + tpot * (spec.n_output_tokens - 1)
            timings = Timings(started_at_s=t0 + i * e2e, e2e_s=e2e, ttft_s=ttft,
                              n_prompt_tokens=20, n_output_tokens=spec.n_output_tokens)
            gen = Generation(f"answer {int(value)}", "stop", spec.n_output_tokens)
            batch.append((PlannedRequest(variant, 0, req), ResponseRecord(gen, timings)))
        store.put_responses(run, batch)
        for (planned, _), value in zip(batch, values, strict=True):
            store.put_scores(spec.plan_hash, planned.key, [ScoreRecord(FILTER, float(value))],
                             scorer="mini@1")
    store.finish_run(run)
    return run.run_id


def outcomes_with(n: int, both: int, b: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    """Baseline and candidate 0/1 arrays with a known 2x2 table (see builders.py)."""
    base = np.zeros(n)
    cand = np.zeros(n)
    base[:both] = cand[:both] = 1.0
    base[both:both + b] = 1.0
    cand[both + b:both + b + c] = 1.0
    return base, cand
