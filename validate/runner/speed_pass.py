"""The headline concurrency sweep of one variant, when the plan has a ``[speed]`` table.

After a variant's quality pass the runner serves ``requests_per_level`` synthetic
requests (``prompt_tokens`` random letters, one token each under the byte tokenizer;
``max_tokens`` output tokens with EOS ignored) at every level of ``sweep_levels``, each
level on a fresh engine from the factory's ``sweep(variant, speed)`` (builtin: the run's
weights pool, so every variant and level reads the same weights; openai: the variant's
endpoint; vllm: the variant's server, started once more for the sweep).
Every variant gets byte-identical requests (seeded by the plan seed), which is what
lets ``compare_headlines`` pair them by request.

Stored per variant (``ResultsStore.put_sweep``): the settings, every level's
per-request timings, the headline, and the comparison vs the baseline (the baseline
runs first, so its sweep exists when a candidate's is compared). A rerun with the same
settings finds the stored sweep and does not sweep again; other settings sweep anew.
"""

from __future__ import annotations

from validate.errors import PlanError
from validate.plan.schema import Plan
from validate.progress import QUIET, Progress
from validate.runner.engines import EngineFactory
from validate.store import ResultsStore, RunInfo


def sweep_settings(plan: Plan) -> dict:
    """What a stored sweep must match to be reused: the [speed] table and the seed of
    the synthetic prompts."""
    table = {k: v for k, v in plan.speed.to_dict().items() if k != "rounds"}  # rounds_pass's
    return {**table, "seed": plan.seed}


def speed_pass(plan: Plan, store: ResultsStore, run: RunInfo, factory: EngineFactory,
               variant: str, progress: Progress = QUIET) -> bool:
    """Sweep ``variant`` unless the plan has no [speed] table or its sweep with these
    settings is stored; returns whether it swept. One bar over the sweep's measured
    requests (every level serves all of them)."""
    if plan.speed is None or not plan.speed.sweep_levels:  # none, or rounds alone
        return False
    settings = sweep_settings(plan)
    stored = store.sweep(plan.hash, variant)
    if stored is not None and stored.settings == settings:
        return False
    if not hasattr(factory, "sweep"):
        raise PlanError(f"{plan.source}: speed: the {factory.kind} engine cannot open one engine "
                        f"per concurrency level (its factory has no sweep())")
    from validate.speed.builtin_sweep import synthetic_requests
    from validate.speed.headline import compare_headlines, headline
    from validate.speed.stored import sweep_from_record, sweep_to_record
    from validate.speed.sweep import concurrency_sweep, warm_up

    spec = plan.speed
    requests = synthetic_requests(spec.requests_per_level, spec.prompt_tokens, spec.max_tokens,
                                  seed=plan.seed)
    with factory.sweep(plan.variant(variant), spec) as engine_at, \
            progress.bar(f"{variant}: speed sweep", len(spec.sweep_levels) * len(requests)) as bar:
        # untimed, every level: a request the engine refuses (a prompt longer than the
        # model's positions, a server that rejects ignore_eos) stops here, in one line
        failure = warm_up(engine_at, requests, spec.sweep_levels)
        if failure is not None:
            raise PlanError(f"{plan.source}: speed: the synthetic request of variant "
                            f"{variant!r} failed: {' '.join(str(failure.error).split())}")
        result = concurrency_sweep(engine_at, requests, levels=spec.sweep_levels,
                                   target_tokens_per_s_per_user=spec.target_tokens_per_s,
                                   user_quantile=spec.user_quantile, stop_after_miss=False,
                                   on_request=bar.advance)
    comparison = None
    if variant != plan.baseline:
        base = store.sweep(plan.hash, plan.baseline)
        if base is not None and base.settings == settings:
            comparison = compare_headlines(sweep_from_record(base.sweep), result,
                                           variant_name=variant,
                                           baseline_name=plan.baseline).to_dict()
    store.put_sweep(run, variant, settings=settings, sweep=sweep_to_record(result),
                    headline=headline(result, variant).to_dict(), comparison=comparison)
    return True
