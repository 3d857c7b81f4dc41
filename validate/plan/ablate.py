"""``--ablate``: one variant per optimization, plus all-on, against the all-reference
exact baseline, so any quality delta can be pinned to one switch.

The matrix comes from the switches' own descriptions (``runtime.options.Ablation``):
``reference`` sets every ablated switch to its ``off`` value (the baseline); each switch
adds its ``alone`` variants, which differ from the reference in that switch only (plus
what it ``implies``); ``all_on`` sets every ablated switch to its ``on`` value. Switches
without an ablation (cut point, batch invariance, replay window) keep the plan
baseline's value in every variant. For the builtin runtime's switches that gives
``reference``, ``encoder_replay``, ``decoder_trim``, ``fused_<op>`` for each op of the
kernel table (``runtime.kernels.ops``) and ``all_on``. The plan's own variants are
replaced.
"""

from __future__ import annotations

from dataclasses import replace

from validate.errors import PlanError
from validate.plan.schema import Plan, VariantSpec


def fused_op_names() -> tuple[str, ...]:
    """The fused ops the runtime can switch one at a time (its kernel table)."""
    from runtime.kernels.ops import OP_NAMES

    return OP_NAMES


def ablation_variants(plan: Plan, ops: tuple[str, ...] | None = None) -> tuple[VariantSpec, ...]:
    """The ablation matrix of ``plan`` (see the module doc); ``ops``: the fused ops to
    ablate (None: every op; ``()``: none, and ``all_on`` keeps the reference kernels)."""
    from runtime.errors import ConfigError
    from runtime.options import switches

    base_spec = plan.variant(plan.baseline)
    base = base_spec.runtime_options()
    options_type = type(base)
    described = switches(options_type)
    ablated = {n: sw.ablation for n, sw in described.items() if sw.ablation is not None}
    kept = {n: getattr(base, n) for n in described if n not in ablated}
    reference = {**kept, **{n: a.off for n, a in ablated.items()}}
    matrix: list[tuple[str, dict]] = [("reference", reference)]
    for name, a in ablated.items():
        for variant, value in a.variants(name, ops):
            matrix.append((variant, {**reference, **a.implies, name: value}))
    all_on = {**reference, **{n: a.on for n, a in ablated.items()}}
    for name, a in ablated.items():  # a switch with nothing to turn on stays off
        if not a.variants(name, ops):
            all_on[name] = reference[name] if name not in _implied(ablated, ops) else a.on
    matrix.append(("all_on", all_on))
    # as v41val 0.1 wrote them (its plan hash), so an ablation store it wrote resumes
    kept_written = {k: v for k, v in (base_spec.written or {}).items() if k not in ablated}
    out = []
    for variant, options in matrix:
        written = {**kept_written, **{n: options[n] for n in ablated}}
        try:
            out.append(VariantSpec(variant, options=options_type(**options), written=written))
        except ConfigError as exc:
            raise PlanError(f"{plan.source}: --ablate variant {variant}: {exc}") from None
    return tuple(out)


def _implied(ablated: dict, ops: tuple[str, ...] | None) -> set[str]:
    """Switches some other switch's variants imply (kept on in ``all_on``)."""
    return {k for n, a in ablated.items() if a.variants(n, ops) for k in a.implies}


def ablate(plan: Plan, ops: tuple[str, ...] | None = None) -> Plan:
    """The ablation plan of ``plan`` (builtin engine only: a vLLM or OpenAI variant is
    a server flag set or endpoint, which v41val cannot split per optimization)."""
    if plan.engine.kind != "builtin":
        raise PlanError(f"{plan.source}: engine.kind: --ablate needs the builtin engine "
                        f"(got {plan.engine.kind!r}); list vLLM flag sets as variants instead")
    return replace(plan, name=f"{plan.name}-ablation", variants=ablation_variants(plan, ops),
                   baseline="reference",
                   description=f"ablation of {plan.name}: one optimization per variant")
