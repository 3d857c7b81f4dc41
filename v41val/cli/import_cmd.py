"""``v41val import-lmeval NAME=PATH ... --baseline NAME [--store FILE]``: store lm-eval
``--log_samples`` runs (one variant each) so ``compare --store``, ``report`` and
``history`` treat them like any run of a plan."""

from __future__ import annotations

from pathlib import Path

import typer

from v41val.cli import app
from v41val.cli.common import emit
from validate.defaults import RUN_WORKSPACE, STORE_NAME
from validate.errors import SamplesFileError


def _pairs(runs: list[str]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for entry in runs:
        name, sep, path = entry.partition("=")
        if not sep or not name or not path:
            raise SamplesFileError(f"run {entry!r}: expected NAME=PATH (a samples file or "
                                   f"directory)")
        if name in out:
            raise SamplesFileError(f"run {name!r} given twice")
        out[name] = Path(path)
    return out


@app.command("import-lmeval")
def import_lmeval_cmd(
    runs: list[str] = typer.Argument(..., help="NAME=PATH per lm-eval run (variant)."),
    baseline: str = typer.Option(..., "--baseline", help="The baseline variant's NAME."),
    store: Path = typer.Option(RUN_WORKSPACE / STORE_NAME, "--store",
                               help="Results store file."),
    name: str = typer.Option("lm-eval import", "--name", help="Plan name to record."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document."),
) -> None:
    """Import lm-eval --log_samples runs into the results store."""
    from validate.lmeval_import import import_lmeval_file

    imported = import_lmeval_file(store, _pairs(runs), baseline, name)
    doc = {"store": str(store), "run_id": imported.run_id, "plan_hash": imported.plan_hash,
           "variants": list(imported.variants), "tasks": list(imported.tasks),
           "documents": imported.documents}
    emit(as_json, doc, lambda console: console.print(
        f"imported {imported.documents} documents of {', '.join(imported.tasks)} as variants "
        f"{', '.join(imported.variants)} (baseline {baseline}) into {store}: run "
        f"{imported.run_id}, plan {imported.plan_hash[:12]}"))
