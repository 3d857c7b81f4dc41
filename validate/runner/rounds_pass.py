"""Interleaved speed rounds of all variants, when the plan's ``[speed]`` has ``rounds``.

After every variant's quality pass (and headline sweep), every variant's engine is
opened at once (``factory.sweep``: builtin on the run's weights pool, openai on each
variant's endpoint), warmed up untimed at the plan's concurrency, and served
``requests_per_level`` synthetic requests once per round in alternating order
(``validate.speed.interleaved``). The record (every request's timings) is stored per
plan, keyed by its settings: a rerun with the same settings does not measure again.
vLLM is refused: it would hold one server per variant at once.
"""

from __future__ import annotations

import contextlib

from validate.errors import PlanError
from validate.plan.schema import Plan
from validate.progress import QUIET, Progress
from validate.runner.engines import EngineFactory
from validate.store import ResultsStore, RunInfo


def rounds_settings(plan: Plan) -> dict:
    s = plan.speed
    return {"rounds": s.rounds, "concurrency": plan.concurrency,
            "requests": s.requests_per_level, "prompt_tokens": s.prompt_tokens,
            "max_tokens": s.max_tokens, "ignore_eos": s.ignore_eos, "seed": plan.seed,
            "variants": list(plan.variant_names)}


def rounds_pass(plan: Plan, store: ResultsStore, run: RunInfo, factory: EngineFactory,
                progress: Progress = QUIET) -> bool:
    """Measure and store the rounds unless off or stored with these settings; returns
    whether it measured."""
    if plan.speed is None or not plan.speed.rounds or len(plan.variants) < 2:
        return False
    settings = rounds_settings(plan)
    stored = store.rounds(plan.hash)
    if stored is not None and stored[0] == settings:
        return False
    if factory.kind == "vllm":
        raise PlanError(f"{plan.source}: speed.rounds: interleaved rounds need every "
                        f"variant's engine at once, on vllm one server per variant at the "
                        f"same time; remove speed.rounds (the sweep still runs)")
    from validate.speed.builtin_sweep import synthetic_requests
    from validate.speed.interleaved import interleaved_rounds, rounds_to_record
    from validate.speed.sweep import warm_up

    spec, level = plan.speed, plan.concurrency
    requests = synthetic_requests(spec.requests_per_level, spec.prompt_tokens, spec.max_tokens,
                                  seed=plan.seed)
    with contextlib.ExitStack() as held:
        openers = {v.name: held.enter_context(factory.sweep(v, spec)) for v in plan.variants}
        for name, engine_at in openers.items():
            failure = warm_up(engine_at, requests, [level])
            if failure is not None:
                raise PlanError(f"{plan.source}: speed.rounds: the synthetic request of "
                                f"variant {name!r} failed: {' '.join(str(failure.error).split())}")
        engines = {name: (lambda at=at: at(level)) for name, at in openers.items()}
        with progress.bar("interleaved speed rounds", spec.rounds * len(engines)) as bar:
            measured = interleaved_rounds(engines, requests, spec.rounds,
                                          on_pass=lambda _r, _v: bar.advance())
    store.put_rounds(run, settings=settings, rounds=rounds_to_record(measured))
    return True
