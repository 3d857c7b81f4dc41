"""Fidelity of every variant of a builtin plan against its baseline, per task.

The glue between a plan and ``analyze_run(..., fidelity=...)``: one baseline engine
and one engine per variant (sharing one ``WeightsPool``), the baseline's greedy targets
computed once per task and reused for every variant, exact full-vocabulary KL. The
result maps ``(variant, task)`` to the analysis' ``FidelitySummary``; pass
``lambda v, t: result.get((v, t))`` as ``fidelity``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tasks.request import Request
from validate.engines.builtin import engine_for_plan
from validate.engines.builtin_source import WeightsPool
from validate.fidelity.collect import exact_records, exact_targets
from validate.fidelity.errors import FidelityError
from validate.fidelity.summary import EXACT, summarize
from validate.fidelity.types import FidelitySummary


def builtin_plan_fidelity(settings: Mapping[str, Any], variants: Mapping[str, Any],
                          baseline: str, requests_by_task: Mapping[str, Sequence[Request]], *,
                          pool: WeightsPool | None = None, concurrency: int = 8, seed: int = 0,
                          warm: bool = False, max_new_tokens: int | None = 32,
                          max_prompts: int | None = None
                          ) -> dict[tuple[str, str], FidelitySummary]:
    """``variants`` maps names to plan ``VariantSpec``s (``runtime_options()`` and
    ``perturb``); ``max_prompts`` caps the prompts per task (the first ones)."""
    if baseline not in variants:
        raise FidelityError(f"fidelity: baseline {baseline!r} is not one of the variants "
                            f"{sorted(variants)}")
    pool = pool if pool is not None else WeightsPool()

    def engine(name: str):
        spec = variants[name]
        return engine_for_plan(settings, spec.runtime_options(), perturb=dict(spec.perturb),
                               concurrency=concurrency, seed=seed, pool=pool, variant=name,
                               warm=warm)

    base = engine(baseline)
    others = {name: engine(name) for name in variants if name != baseline}
    out: dict[tuple[str, str], FidelitySummary] = {}
    for task, requests in requests_by_task.items():
        chosen = list(requests)[:max_prompts] if max_prompts else list(requests)
        targets = exact_targets(base, chosen, max_new_tokens=max_new_tokens)
        for name, variant in others.items():
            out[(name, task)] = summarize(exact_records(base, variant, targets), EXACT)
    return out
