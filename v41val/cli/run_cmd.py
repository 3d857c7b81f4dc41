"""``v41val run PLAN [--ablate] [--workspace DIR] [--json]``: run (or resume) a plan,
analyse it, and exit with the gate decision: 0 GO (or no policy), 1 NO-GO,
3 INCONCLUSIVE, 4 INVALID (a broken variant), 2 bad input, 130 stopped by Ctrl-C
(the run is marked interrupted; the same command resumes it)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from v41val.cli import app
from v41val.cli.common import EXIT_INTERRUPTED, emit, notice, stderr_console, stdout_console
from v41val.cli.progress import shown_progress


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
    from validate.interrupt import stop_on_interrupt
    from validate.runner.execute import execute, prepare

    loaded = prepare(plan, ablate=ablate)  # bad input fails here, before any output
    if ablate:  # the variants, what is left out and the bill, before any work
        from validate.runner.preview import ablation_preview

        for line in ablation_preview(loaded).lines():
            stderr_console().print(line, highlight=False)
    try:
        with stop_on_interrupt(notice), shown_progress(as_json) as progress:
            execution = execute(loaded, workspace=workspace, progress=progress)
    except KeyboardInterrupt:
        notice("stopped: the run is marked interrupted in its store; the same command "
               "again resumes it")
        return EXIT_INTERRUPTED
    for variant in execution.outcome.variants:  # what the engine said, on stderr
        line = variant.failure_line()
        if line is not None:
            notice(line)
    if as_json:  # the report document of `v41val report --format json`, plus "execution"
        from reports.document import report_document

        emit(True, report_document(execution.analysis, execution=execution.execution_dict()),
             lambda console: None)
    else:
        _render(execution, stdout_console())
    return execution.analysis.exit_code
