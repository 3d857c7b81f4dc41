"""``v41val history``: accuracy and speed per plan, task and variant across the runs in
a results store, with runs flagged that are significantly worse than their trailing
baseline (paired where items match) or slower beyond ``--speed-drop``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from v41val.cli import app
from v41val.cli.common import stderr_console, stdout_console


@app.command("history")
def history(
    store: Path = typer.Option(Path(".v41val/results.sqlite"), "--store",
                               help="Results store file (v41val run's default workspace)."),
    since: Optional[str] = typer.Option(None, "--since", help="Only runs from this UTC date."),
    plan: Optional[str] = typer.Option(None, "--plan", help="Only this plan name."),
    fmt: str = typer.Option("terminal", "--format", "-f", help="terminal | html | json"),
    window: int = typer.Option(5, "--window", help="Trailing runs forming the baseline."),
    alpha: float = typer.Option(0.05, "--alpha", help="One-sided level of the 'worse' flag."),
    speed_drop: float = typer.Option(0.10, "--speed-drop", help="Flagged slow-down fraction."),
    metric: Optional[str] = typer.Option(None, "--metric", help="Filter/metric to trend."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write here."),
    out_dir: Path = typer.Option(Path("."), "--out-dir", help="Directory -o must stay inside."),
    fail_on_flag: bool = typer.Option(False, "--fail-on-flag",
                                      help="Exit 1 when a shown point is flagged."),
) -> int:
    """Trends of accuracy and speed across stored runs, with regression flags."""
    from reports.api import HISTORY_FORMATS, check_format, open_store
    from reports.history_render import (
        history_text,
        render_history_html,
        render_history_terminal,
    )
    from reports.json_report import render_json
    from reports.paths import write_text_safely
    from validate.analysis.history import HistoryOptions, build_history, parse_since

    check_format(fmt, HISTORY_FORMATS)
    options = HistoryOptions(plan=plan, since=parse_since(since), window=window, alpha=alpha,
                             speed_drop=speed_drop, metric=metric)
    with open_store(store) as opened:
        result = build_history(opened, options)
    if fmt == "terminal" and output is None:
        render_history_terminal(result, stdout_console())
    else:
        text = (render_history_html(result) if fmt == "html" else
                render_json(result.to_dict()) if fmt == "json" else history_text(result))
        if output is not None:
            path = write_text_safely(output, text, out_dir)
            stderr_console().print(f"wrote {path}")
        else:
            typer.echo(text, nl=False)
    return 1 if fail_on_flag and result.flagged else 0
