"""Teacher-forced fidelity of every variant against the baseline (builtin engine).

After the responses are stored: the baseline decodes greedily the first
``fidelity_prompts`` items of each task (at most ``fidelity_tokens`` tokens), and both
the baseline and the variant score exactly those tokens after the same prompt through
their real serving path, with full-vocabulary logits: per-token KL(base || variant),
top-1 agreement, first divergence (``validate.fidelity``). Records are written per
(variant, task) into the results store as soon as they exist, and within a pair after
every teacher-forced batch (a partial row), so a rerun after a kill computes only what
is missing (or everything again when the fidelity settings changed).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from tasks.task import Task
from validate.plan.schema import Plan
from validate.progress import QUIET, Progress
from validate.runner.engines import EngineFactory
from validate.runner.requests import planned_requests
from validate.store import ResultsStore

METHOD = "exact full-vocab"


def fidelity_pass(plan: Plan, store: ResultsStore, factory: EngineFactory,
                  loaded: Mapping[str, Task], progress: Progress = QUIET) -> int:
    """Compute the missing fidelity records; returns how many (variant, task) it did.
    One "fidelity" bar over the (variant, task) pairs, shown before the first engine
    is built and moved within a pair after each batch of prompts."""
    if factory.kind != "builtin" or plan.fidelity_prompts == 0 or len(plan.variants) < 2:
        return 0
    from validate.fidelity.collect import exact_fidelity
    from validate.fidelity.summary import PromptFidelity

    settings = {"prompts": plan.fidelity_prompts, "tokens": plan.fidelity_tokens}
    doc = store.fidelity_document(plan.hash)
    records = doc.get("records", {}) if doc.get("settings") == settings else {}
    requests = {}
    for spec in plan.tasks:
        rows = [p.request for p in planned_requests(plan, loaded, plan.baseline)
                if p.request.task == spec.name and p.repeat == 0]
        requests[spec.name] = rows[: plan.fidelity_prompts]
    todo = [(v, t) for v in plan.variant_names if v != plan.baseline
            for t in requests if t not in records.get(v, {})]
    if not todo:
        return 0
    done = 0
    with progress.bar("fidelity", len(todo)) as bar, \
            factory.open(plan.variant(plan.baseline)) as base:
        for variant in dict.fromkeys(v for v, _ in todo):
            with factory.open(plan.variant(variant)) as engine:
                for v, task in todo:
                    if v != variant:
                        continue
                    found = exact_fidelity(
                        base, engine, requests[task], max_new_tokens=plan.fidelity_tokens,
                        progress=lambda f, d=done: bar.update(d + f),
                        prior=[PromptFidelity.from_dict(r) for r in store.fidelity_partial(
                            plan.hash, variant, task, settings)],
                        on_records=partial(_save, store, plan.hash, variant, task, settings,
                                           complete=False))
                    _save(store, plan.hash, variant, task, settings, found, complete=True)
                    done += 1
                    bar.update(done)
    return len(todo)


def _save(store: ResultsStore, plan_hash: str, variant: str, task: str, settings: dict,
          records, *, complete: bool) -> None:
    store.put_fidelity(plan_hash, variant, task, settings=settings, method=METHOD,
                       records=[r.to_dict() for r in records], complete=complete)
