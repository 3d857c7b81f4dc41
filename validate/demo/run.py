"""``v41val demo`` as a library call: build the embedded plan, run it, analyse it.

The run goes through the same path as ``v41val run`` (``validate.runner.execute``), so
the store in the workspace is an ordinary results store: ``v41val report`` reads it
afterwards, and a second demo in the same workspace resumes instead of recomputing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from validate.defaults import DEMO_WORKSPACE
from validate.demo.errors import DemoError
from validate.demo.plan import DEFAULT_ITEMS, demo_plan
from validate.plan.fused import FusedAvailability, fused_availability
from validate.plan.schema import Plan
from validate.progress import QUIET, Progress
from validate.threads import check_threads

DEFAULT_WORKSPACE = DEMO_WORKSPACE


@dataclass(frozen=True)
class DemoSettings:
    """``items``: testbed items in all (split evenly over its tasks); ``threads``: torch CPU threads while the demo
    runs (1 by default: on a shared 2-core machine a second OpenMP thread spins against
    other jobs and was measured up to 10x slower; None keeps torch's own choice)."""

    items: int = DEFAULT_ITEMS
    workspace: Path = DEFAULT_WORKSPACE
    device: str = "cpu"
    threads: int | None = 1

    def __post_init__(self) -> None:
        if self.threads is not None:
            check_threads(self.threads, "--threads", DemoError)  # validate.threads
        if self.device not in ("cpu", "cuda") and not self.device.startswith("cuda:"):
            raise DemoError(f"--device: expected cpu or cuda[:N], got {self.device!r}")


@dataclass(frozen=True)
class DemoResult:
    plan: Plan
    fused: FusedAvailability
    execution: object  # validate.runner.execute.Execution
    wall_s: float
    settings: DemoSettings = field(default_factory=DemoSettings)

    def demo_dict(self) -> dict:
        """What the demo chose and why (the CLI adds it to the run's report document as
        ``"demo"``; validate renders no reports)."""
        return {"items": self.settings.items, "device": self.settings.device,
                "threads": self.settings.threads, "wall_s": self.wall_s,
                "store": str(self.execution.store_path), "variants": list(self.plan.variant_names),
                "fused": self.fused.to_dict(), "plan": self.plan.to_dict()}


def prepare_demo(settings: DemoSettings) -> tuple[Plan, FusedAvailability]:
    """The plan the demo will run on ``settings.device`` (input errors surface here)."""
    fused = fused_availability(settings.device)
    return demo_plan(settings.items, settings.device, fused.ops), fused


def run_demo(settings: DemoSettings, progress: Progress = QUIET) -> DemoResult:
    """Run (or resume) the demo plan in ``settings.workspace`` and analyse it."""
    import torch

    from validate.runner.execute import execute

    start = time.perf_counter()
    plan, fused = prepare_demo(settings)
    threads = torch.get_num_threads()
    if settings.threads is not None:
        torch.set_num_threads(settings.threads)
    try:
        execution = execute(plan, workspace=settings.workspace, progress=progress)
    finally:
        torch.set_num_threads(threads)
    return DemoResult(plan, fused, execution, time.perf_counter() - start, settings)
