"""``v41val demo [--items N] [--workspace DIR] [--json]``: the embedded default plan on a
trained V4.1 testbed and its shipped tasks, the ablation matrix, then the full report
(led by the fidelity metrics where the model is at a task's floor), one sentence per
optimization saying what the run shows, and the paths of the HTML and Markdown reports
written into the workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Group

from v41val.cli import app
from v41val.cli.common import EXIT_INTERRUPTED, emit, notice
from v41val.cli.progress import shown_progress
from validate.defaults import DEMO_ITEMS, DEMO_WORKSPACE


def _render(doc: dict, console) -> None:
    from reports.terminal import renderables
    from validate.demo.lead import closing_line, lead_renderables

    console.print(Group(*lead_renderables(doc), *renderables(doc, console.width)))
    console.print("What this run shows:", style="bold")
    for sentence in doc["demo"]["conclusions"]:
        console.print(f"  - {sentence}")
    console.print(closing_line(doc))
    for fmt, path in doc["demo"]["reports"].items():
        console.print(f"{fmt} report: {path}")
    store = doc["demo"]["store"]
    console.print(f"stored in {store}; again: v41val report {doc['run']['run_id']} "
                  f"--store {store}")


@app.command("demo")
def demo(
    items: int = typer.Option(DEMO_ITEMS, "--items",
                              help="Testbed items in all (split evenly over its 3 tasks, at least 2 each)."),
    workspace: Path = typer.Option(DEMO_WORKSPACE, "--workspace",
                                   help="Directory of the results store (kept, so "
                                        "v41val report works afterwards)."),
    threads: Optional[int] = typer.Option(1, "--threads",
                                          help="torch CPU threads (0: torch's default)."),
    device: str = typer.Option("cpu", "--device", help="cpu, or cuda for fused variants."),
    as_json: bool = typer.Option(False, "--json", help="The report JSON document."),
) -> int:
    """The trained V4.1 testbed, its shipped tasks, the ablation matrix, the full report (< 3 min on CPU)."""
    from validate.demo import DemoSettings, prepare_demo, run_demo
    from validate.interrupt import stop_on_interrupt

    settings = DemoSettings(items=items, workspace=workspace, device=device,
                            threads=None if threads == 0 else threads)
    prepare_demo(settings)  # bad input fails here, before any output
    try:
        with stop_on_interrupt(notice), shown_progress(as_json) as progress:
            result = run_demo(settings, progress=progress)
    except KeyboardInterrupt:
        notice(f"stopped: the demo run is marked interrupted in {workspace}; the same "
               "command again resumes it")
        return EXIT_INTERRUPTED
    from reports.api import demo_document

    doc = demo_document(result)
    emit(as_json, doc, lambda console: _render(doc, console))
    return 0
