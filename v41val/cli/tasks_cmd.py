"""``v41val tasks list | show | check``: the evaluation tasks (see the ``tasks`` package).

Thin: parse, call ``tasks``, render. GPQA text appears only on an interactive terminal
(never with ``--json`` or when stdout is a pipe or file).
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from v41val.cli import app
from v41val.cli.common import emit

tasks_app = typer.Typer(help="Evaluation tasks: list, show a prompt, self-check.",
                        no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")

DATA_DIR_HELP = "Data directory to read instead of the data shipped with v41val."


@tasks_app.command("list")
def list_tasks(as_json: bool = typer.Option(False, "--json", help="One JSON document.")) -> None:
    """Every task variant: version, items, kind, generation budget."""
    import tasks

    rows = [tasks.info(name).to_dict() for name in tasks.names()]  # no data read

    def render(console) -> None:
        table = Table(title="v41val tasks", padding=(0, 1), collapse_padding=True)
        table.add_column("name", no_wrap=True)
        table.add_column("version", no_wrap=True)
        table.add_column("items", justify="right", no_wrap=True)
        table.add_column("kind", no_wrap=True)
        table.add_column("max_gen_toks", justify="right", no_wrap=True)
        for row in rows:
            kind = "chat" if row["chat"] else row["kind"]
            table.add_row(row["name"], row["version"], str(row["n_items"]), kind,
                          "-" if row["max_gen_toks"] is None else str(row["max_gen_toks"]))
        console.print(table)

    emit(as_json, {"tasks": rows}, render)


@tasks_app.command("show")
def show(
    name: str = typer.Argument(..., help="Task name (see `v41val tasks list`)."),
    item_id: str = typer.Option(None, "--item", help="Item id; default: the first item."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document (no GPQA text)."),
) -> None:
    """Render one item's request exactly as an engine receives it."""
    import tasks
    from tasks.presentation import request_document, text_is_shareable

    task = tasks.get(name)
    item = task.item(item_id) if item_id is not None else task.items()[0]
    document = request_document(task, item)

    def render(console) -> None:
        table = Table(title=f"{task.name} v{task.version} · {item.id}", show_header=False)
        for key, value in document.items():
            if key not in ("prompt", "messages"):
                table.add_row(key, escape(str(value)))
        console.print(table)
        if not text_is_shareable(task) and not sys.stdout.isatty():
            console.print("(GPQA prompt text is shown on an interactive terminal only)")
            return
        request = task.render(item)
        if request.prompt is not None:
            console.print(escape(request.prompt), soft_wrap=True)
        for message in request.messages or ():
            console.print(f"[bold]{message.role}:[/bold]")
            console.print(escape(message.content), soft_wrap=True)

    emit(as_json, document, render)


@tasks_app.command("check")
def check(
    data_dir: Path = typer.Option(None, "--data-dir", help=DATA_DIR_HELP),
    as_json: bool = typer.Option(False, "--json", help="One JSON document."),
) -> int:
    """Self-check: checksums, item counts, gold oracle 1.0 and wrong oracle 0.0 on every
    item of every variant. Exit 0 only if everything passes (1 otherwise)."""
    from tasks.selfcheck import run_self_check

    report = run_self_check(data_dir=data_dir)

    def render(console) -> None:
        table = Table(title="v41val tasks check")
        table.add_column("check", no_wrap=True)
        table.add_column("subject", no_wrap=True)
        table.add_column("result", no_wrap=True)
        table.add_column("detail")
        for r in report.results:
            table.add_row(r.check, r.subject, "[green]pass[/green]" if r.passed
                          else "[red]FAIL[/red]", escape(r.detail))
        console.print(table)
        console.print("[green]all checks passed[/green]" if report.passed
                      else "[red]self-check FAILED[/red]")

    emit(as_json, report.to_dict(), render)
    return 0 if report.passed else 1
