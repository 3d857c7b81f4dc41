"""``v41val version``: the package and environment versions that identify a run."""

from __future__ import annotations

import typer
from rich.table import Table

from v41val.cli import app
from v41val.cli.common import emit


@app.command("version")
def version(as_json: bool = typer.Option(False, "--json", help="One JSON document.")) -> None:
    """Print v41val's version and the versions of what it runs on."""
    from validate.identity import environment_identity

    ident = environment_identity()

    def render(console) -> None:
        table = Table(title="v41val", show_header=False)
        for key, value in ident.items():
            table.add_row(key, str(value))
        console.print(table)

    emit(as_json, ident, render)
