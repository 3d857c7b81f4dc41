"""``v41val report RUN``: render an analysed run from the results store as terminal text,
Markdown, a self-contained HTML page, JSON (reports/schema/report.schema.json) or JUnit
XML. ``-o`` writes inside ``--out-dir`` (default: the current directory) and never
outside it. ``--exit-code`` exits with the run decision (0 GO/UNGATED, 1 NO-GO,
3 INCONCLUSIVE, 4 INVALID) for CI; 2 is bad input (an unknown run id included)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from v41val.cli import app
from v41val.cli.common import stderr_console, stdout_console
from v41val.cli.progress import shown_progress


@app.command("report")
def report(
    run: str = typer.Argument(..., help="Run id, plan hash (or unique prefix), or 'latest'."),
    store: Path = typer.Option(Path(".v41val/results.sqlite"), "--store",
                               help="Results store file (v41val run's default workspace)."),
    fmt: str = typer.Option("terminal", "--format", "-f",
                            help="terminal | md | html | json | junit"),
    output: Optional[Path] = typer.Option(None, "-o", "--output",
                                          help="Write here (inside --out-dir) instead of stdout."),
    out_dir: Path = typer.Option(Path("."), "--out-dir", help="Directory -o must stay inside."),
    policy: Optional[Path] = typer.Option(None, "--policy",
                                          help="Gate policy overriding the plan's."),
    exit_code: bool = typer.Option(False, "--exit-code",
                                   help="Exit with the decision's code (CI)."),
) -> int:
    """Report one run: tables, plots, verdicts and the decision."""
    from reports.api import build_report, render_report
    from reports.paths import safe_output_path, write_text_safely
    from reports.terminal import render_terminal

    if output is not None:
        safe_output_path(output, out_dir)  # refuse an escaping path before any work
    with shown_progress(fmt == "json") as progress:
        doc, samples = build_report(store, run, fmt, policy, progress)
    if output is not None:
        path = write_text_safely(output, render_report(doc, fmt, samples), out_dir)
        stderr_console().print(f"wrote {path} ({doc['decision']})")
    elif fmt == "terminal":
        render_terminal(doc, stdout_console())
    else:
        typer.echo(render_report(doc, fmt, samples), nl=False)
    return doc["exit_code"] if exit_code else 0
