"""Plans: what to run (engine, variants, tasks, baseline, seeds, policy), from TOML.

- ``load_plan(path)`` / ``parse_plan(doc)`` -> ``Plan`` (strict; ``PlanError`` naming file
  and field)
- ``ablate(plan)`` -> the one-optimization-at-a-time plan (``--ablate``)
- ``Plan.hash``: identity of the responses (what a rerun resumes by)
"""

from validate.plan.ablate import ablate, ablation_variants, fused_op_names
from validate.plan.load import load_plan, parse_plan
from validate.plan.schema import EngineSpec, Plan, TaskSpec, VariantSpec

__all__ = ["EngineSpec", "Plan", "TaskSpec", "VariantSpec", "ablate", "ablation_variants",
           "fused_op_names", "load_plan", "parse_plan"]
