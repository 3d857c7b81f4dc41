"""``v41val run PLAN [--ablate] [--workspace DIR] [--json]``: run (or resume) a plan,
analyse it, and exit with the gate decision: 0 GO (or no policy), 1 NO-GO,
3 INCONCLUSIVE, 4 INVALID (a broken variant), 2 bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from v41val.cli import app
from v41val.cli.common import emit, stderr_console, stdout_console


class _Bars:
    """One progress bar per variant, on stderr (stdout stays one JSON document)."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.bars: dict[str, int] = {}

    def __call__(self, event) -> None:
        if event.kind == "start":
            self.bars[event.variant] = self.progress.add_task(event.variant, total=event.total)
        elif event.kind in ("stored", "failed"):
            self.progress.update(self.bars[event.variant], completed=event.done)
        elif event.kind == "fidelity":
            if "fidelity" not in self.bars:
                self.bars["fidelity"] = self.progress.add_task("fidelity", total=event.total)
            self.progress.update(self.bars["fidelity"], completed=event.done)


def _render(execution, console) -> None:
    try:
        from reports.document import report_document
        from reports.terminal import render_terminal
    except ImportError:
        render_terminal = None
    a = execution.analysis
    if render_terminal is not None:
        render_terminal(report_document(a), console)
    else:
        console.print(f"decision: {a.decision} (exit {a.exit_code})")
    console.print(f"stored in {execution.store_path} (run {a.identity.run_id}, plan "
                  f"{a.identity.plan_hash[:12]}); again: v41val report {a.identity.run_id} "
                  f"--store {execution.store_path}")


@app.command("run")
def run(
    plan: Path = typer.Argument(..., help="Plan file (TOML)."),
    ablate: bool = typer.Option(False, "--ablate",
                                help="One variant per optimization plus all-on, against "
                                     "the all-reference exact baseline."),
    workspace: Optional[Path] = typer.Option(None, "--workspace",
                                             help="Directory of the results store "
                                                  "(default: .v41val)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document."),
) -> int:
    """Run (or resume) a plan and gate it."""
    from validate.runner.execute import execute, prepare

    loaded = prepare(plan, ablate=ablate)  # bad input fails here, before any output
    if ablate:  # the variants, what is left out and the bill, before any work
        from validate.runner.preview import ablation_preview

        for line in ablation_preview(loaded).lines():
            stderr_console().print(line, highlight=False)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=stderr_console(), transient=True) as progress:
        execution = execute(loaded, workspace=workspace, progress=_Bars(progress))
    if as_json:  # the report document of `v41val report --format json`, plus "execution"
        from reports.document import report_document

        emit(True, report_document(execution.analysis, execution=execution.execution_dict()),
             lambda console: None)
    else:
        _render(execution, stdout_console())
    return execution.analysis.exit_code
