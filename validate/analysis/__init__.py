"""The analysed run (``RunAnalysis``) built from a results store.

- ``analyze_run(store, run=None, policy=None, ...)`` -> ``RunAnalysis`` (``build.py``)
- the dataclasses reports render: ``model.py``
"""

from validate.analysis.build import analyze_run, item_outcomes
from validate.analysis.model import (
    ComparisonRow,
    FidelitySummary,
    HeadlineSection,
    Percentiles,
    PolicySummary,
    RunAnalysis,
    RunIdentity,
    SpeedSummary,
    Speedup,
    VariantHealth,
    VariantSummary,
)
from validate.analysis.source import RunNotFound, resolve_plan_hash

__all__ = ["ComparisonRow", "FidelitySummary", "HeadlineSection", "Percentiles", "PolicySummary", "RunAnalysis",
           "RunIdentity", "RunNotFound", "SpeedSummary", "Speedup", "VariantHealth",
           "VariantSummary", "analyze_run", "item_outcomes", "resolve_plan_hash"]
