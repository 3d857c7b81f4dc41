"""The plan ``v41val plan`` asks for (``validate.sizing_request.PlanRequest``, checked).

``--policy`` sizes every task of a gate policy for the family the gate will correct
over: ``--variants`` optimizations x the policy's tasks (advisory ones included: the
gate counts them), with the policy's alpha, power and correction. Without a policy,
``--claims`` and ``--correction`` say the family.
"""

from __future__ import annotations

from validate.errors import StatsInputError
from validate.gate.policy import load_policy
from validate.sizing_request import PlanRequest, check_request
from validate.stats import planning
from validate.stats.outcomes import PairedOutcomes
from validate.stats.task_sizes import task_size


def _repeats_of(req: PlanRequest, task: str) -> int:
    return req.repeats.get(task, req.repeats.get("*", 1))


def make_plan(req: PlanRequest, aa: PairedOutcomes | None = None
              ) -> planning.PowerPlan | planning.FamilyPlan:
    """The plan ``req`` asks for; ``aa``: a paired A/A pilot (``--from-aa``)."""
    check_request(req)
    delta = req.delta_points / 100.0
    rho = 0.0 if req.rho is None else req.rho
    if req.policy is not None:
        policy = load_policy(req.policy)
        if aa is not None:
            raise StatsInputError("--from-aa: not with --policy; pass --discordance")
        if req.discordance is None:
            raise StatsInputError("plan --policy needs --discordance")
        specs = [planning.ClaimSpec(tp.task, task_size(tp.task, req.n), tp.margin,
                                    _repeats_of(req, tp.task)) for tp in policy.tasks]
        return planning.plan_family(
            specs, req.discordance, req.alpha or policy.alpha, req.power or policy.power,
            delta, variants=req.variants, correction=req.correction or policy.correction,
            rho=rho, discordance_source="assumed", equivalence=policy.equivalence)
    alpha, power = req.alpha or 0.05, req.power or 0.8
    correction = req.correction or "holm"
    family = req.claims * req.variants
    margin = req.margin_points / 100.0
    if aa is not None:
        explicit = _repeats_of(req, req.task or aa.task) if req.repeats else None
        return planning.plan_from_aa(aa, task_size(req.task or aa.task, req.n), margin, alpha,
                                     power, family, correction, explicit, req.rho)
    if req.discordance is None:
        raise StatsInputError("plan needs --discordance or --from-aa A B")
    if req.task is None and req.n is None:
        raise StatsInputError("plan needs --task or --n")
    return planning.plan_noninferiority(
        req.task or "task", task_size(req.task, req.n), margin, req.discordance, alpha, power,
        delta, family_size=family, correction=correction,
        repeats=_repeats_of(req, req.task or "task"), rho=rho)
