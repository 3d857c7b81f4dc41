"""``v41val demo``: the embedded default plan (``plan``), which fused variants the device
can run (``fused``), the orchestration (``run``) and the lead-in of its report
(``lead``)."""

from validate.demo.plan import demo_plan, plan_document
from validate.demo.run import DemoResult, DemoSettings, prepare_demo, run_demo

__all__ = ["DemoResult", "DemoSettings", "demo_plan", "plan_document", "prepare_demo", "run_demo"]
