"""``--ablate``: one variant per optimization, plus all-on, against the all-reference
exact baseline, so any quality delta can be pinned to one switch.

Variants (builtin engine): ``reference`` (exact SWA, no replay, no trim, reference
kernels; the baseline), ``encoder_replay`` (bounded replay on the encoder side only),
``decoder_trim`` (decoder-side trim only), ``fused_<op>`` for each fused op the runtime's
kernel registry offers (``kernels = "+<op>"``), and ``all_on`` (bounded both sides,
every fused op). A fused variant whose kernel choice ``RuntimeOptions`` does not accept
yet is left out and named in the plan's description. The plan's own variants are replaced; the cut point, batch invariance
and replay window of its baseline are kept for every ablated variant.
"""

from __future__ import annotations

import importlib
from dataclasses import replace

from validate.errors import PlanError
from validate.plan.schema import Plan, VariantSpec

KEPT_OPTIONS = ("cut", "batch_invariant", "replay_tokens")
NOT_OPS = ("reference", "none", "all")


def fused_op_names() -> tuple[str, ...]:
    """The fused ops the runtime can switch one at a time: from its kernel registry
    (``runtime.kernels``) when there is one, else the non-reference choices of
    ``RuntimeOptions.kernels``. Empty while only reference kernels exist."""
    for module in ("runtime.kernels.choice", "runtime.kernels"):
        try:  # the choice module has no heavy imports; the package imports torch
            registry = importlib.import_module(module)
        except ImportError:
            continue
        for attr in ("OP_NAMES", "op_names", "OPS"):
            found = getattr(registry, attr, None)
            if found is not None:
                names = found() if callable(found) else found
                return tuple(str(n) for n in names)
    from runtime.options import KERNEL_CHOICES

    return tuple(k for k in KERNEL_CHOICES if k not in NOT_OPS and k[:1] not in "+-")


def ablation_variants(plan: Plan, ops: tuple[str, ...] | None = None) -> tuple[VariantSpec, ...]:
    ops = fused_op_names() if ops is None else ops
    base = plan.variant(plan.baseline)
    kept = {k: v for k, v in base.options.items() if k in KEPT_OPTIONS}
    reference = {**kept, "swa": "exact", "encoder_replay": False, "decoder_trim": False,
                 "kernels": "reference"}
    variants = [
        VariantSpec("reference", options=reference),
        VariantSpec("encoder_replay", options={**reference, "swa": "bounded",
                                               "encoder_replay": True}),
        VariantSpec("decoder_trim", options={**reference, "swa": "bounded",
                                             "decoder_trim": True}),
    ]
    variants += [VariantSpec(f"fused_{op}", options={**reference, "kernels": f"+{op}"})
                 for op in ops]
    all_on = {**reference, "swa": "bounded", "encoder_replay": True, "decoder_trim": True}
    if ops:
        all_on["kernels"] = "all"
    variants.append(VariantSpec("all_on", options=all_on))
    return tuple(variants)


def accepted_ops(ops: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(ops ``RuntimeOptions(kernels="+op")`` accepts, ``fused_<op>`` names of the rest):
    the registry may know an op before RuntimeOptions does."""
    from runtime.errors import ConfigError
    from runtime.options import RuntimeOptions

    accepted, refused = [], []
    for op in ops:
        try:
            RuntimeOptions(kernels=f"+{op}")
            accepted.append(op)
        except (ConfigError, ValueError):
            refused.append(f"fused_{op}")
    return tuple(accepted), tuple(refused)


def ablate(plan: Plan, ops: tuple[str, ...] | None = None) -> Plan:
    """The ablation plan of ``plan`` (builtin engine only: a vLLM or OpenAI variant is
    a server flag set or endpoint, which v41val cannot split per optimization)."""
    if plan.engine.kind != "builtin":
        raise PlanError(f"{plan.source}: engine.kind: --ablate needs the builtin engine "
                        f"(got {plan.engine.kind!r}); list vLLM flag sets as variants instead")
    from runtime.errors import ConfigError
    from runtime.options import RuntimeOptions

    accepted, skipped = accepted_ops(fused_op_names() if ops is None else ops)
    variants = ablation_variants(plan, accepted)
    for v in variants:
        try:
            RuntimeOptions(**v.options)
        except (ConfigError, ValueError) as exc:
            raise PlanError(f"{plan.source}: --ablate variant {v.name}: {exc}") from None
    note = (f" (skipped, RuntimeOptions.kernels refuses them: {', '.join(skipped)})"
            if skipped else "")
    return replace(plan, name=f"{plan.name}-ablation", variants=variants,
                   baseline="reference",
                   description=f"ablation of {plan.name}: one optimization per variant{note}")
