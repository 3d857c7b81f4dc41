"""``v41val demo``: the embedded default plan (``plan``), the orchestration (``run``, with
the fused variants the device can run from ``validate.plan.fused``), the lead-in of its
report (``lead``) and one sentence per optimization (``conclusions``)."""

from validate.demo.plan import demo_plan, plan_document
from validate.demo.run import DemoResult, DemoSettings, prepare_demo, run_demo

__all__ = ["DemoResult", "DemoSettings", "demo_plan", "plan_document", "prepare_demo", "run_demo"]
