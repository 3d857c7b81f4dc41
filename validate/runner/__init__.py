"""Execute plans into the results store (resumable; responses stored before scoring).

- ``run_plan(plan, store, factory=None, progress=QUIET)`` -> ``RunOutcome``
- ``planned_requests`` / ``load_tasks``: the requests a plan wants
- ``score_pending``: score stored responses that have no score yet
"""

from validate.runner.engines import EngineFactory, factory_for
from validate.runner.requests import load_tasks, planned_requests
from validate.runner.run import RunOutcome, VariantRunStats, run_plan
from validate.scoring import metric_key, primary_metric, score_pending

__all__ = ["EngineFactory", "RunOutcome", "VariantRunStats", "factory_for",
           "load_tasks", "metric_key", "planned_requests", "primary_metric", "run_plan",
           "score_pending"]
