"""``v41val gate A B --policy P``: the release gate; exit 0 GO, 1 NO-GO,
3 INCONCLUSIVE, 4 INVALID, 2 bad input. Same pairing and statistics as ``compare``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from v41val.cli import app
from v41val.cli.compare_cmd import render_comparison


@app.command("gate")
def gate(
    a: Path = typer.Argument(..., help="Baseline: lm-eval samples file or directory."),
    b: Path = typer.Argument(..., help="Candidate: lm-eval samples file or directory."),
    policy: Path = typer.Option(..., "--policy", help="Gate policy (TOML)."),
    task: Optional[str] = typer.Option(None, "--task", help="Only this task."),
    replicates: int = typer.Option(10_000, "--bootstrap", help="Bootstrap replicates."),
    seed: int = typer.Option(20261129, "--seed", help="Bootstrap seed."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document."),
) -> int:
    """Run the release gate of B against A under a policy."""
    from validate.gate.from_lmeval import compare_lmeval
    from validate.stats import BootstrapSpec

    spec = BootstrapSpec(replicates=replicates, seed=seed)
    return render_comparison(compare_lmeval(a, b, policy, task, 0.05, spec), as_json)
