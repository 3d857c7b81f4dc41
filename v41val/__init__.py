"""v41val: accuracy-vs-speed validation for DeepSeek-V4.1 inference optimizations.

The top of the layering (``docs/architecture.md``): the ``v41val`` command line
(``v41val.cli``) and this public API, over ``reports`` (rendering), ``validate``
(plans, engines, store, statistics, gate), and ``runtime`` / ``tasks`` at the bottom.
Nothing below imports this package.

    from v41val import load_plan, ablate, execute, report_document
    execution = execute(ablate(load_plan("plan.toml")), workspace="runs/x")
    doc = report_document(execution.analysis)       # the JSON report document

Names load on first use (PEP 562), so ``import v41val`` (and ``v41val --help``) stays
light.
"""

from __future__ import annotations

import importlib

_WHERE = {
    "RuntimeOptions": "runtime.options",
    "EngineConfig": "runtime.scheduling",
    "load_plan": "validate.plan",
    "parse_plan": "validate.plan",
    "ablate": "validate.plan",
    "Plan": "validate.plan",
    "run_plan": "validate.runner",
    "execute": "validate.runner.execute",
    "ResultsStore": "validate.store",
    "analyze_run": "validate.analysis",
    "RunAnalysis": "validate.analysis",
    "load_policy": "validate.gate",
    "evaluate_gate": "validate.gate",
    "report_document": "reports.document",
    "render_report": "reports.api",
    "build_report": "reports.api",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'v41val' has no attribute {name!r}")
