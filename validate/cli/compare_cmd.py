"""``v41val compare A B``: paired statistics of two variants, and the gate with --policy.

A and B are lm-eval ``--log_samples`` files or directories (paired by doc id and
prompt hash). With ``--policy`` the release gate runs and the exit code is the run
decision: 0 GO, 1 NO-GO, 3 INCONCLUSIVE, 4 INVALID (2: bad input).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.text import Text

from validate.cli import app
from validate.cli.common import emit
from validate.gate.from_lmeval import compare_lmeval
from validate.stats import BootstrapSpec
from validate.stats.jsonable import json_safe


def render_comparison(result, as_json: bool) -> int:
    emit(as_json, json_safe(result.to_dict()), lambda console: console.print(Text(result.report()), soft_wrap=True))
    return result.exit_code


@app.command("compare")
def compare(
    a: Path = typer.Argument(..., help="Baseline: lm-eval samples file or directory."),
    b: Path = typer.Argument(..., help="Candidate: lm-eval samples file or directory."),
    policy: Optional[Path] = typer.Option(None, "--policy", help="Gate policy (TOML)."),
    task: Optional[str] = typer.Option(None, "--task", help="Only this task."),
    alpha: float = typer.Option(0.05, "--alpha", help="Two-sided level of the CIs."),
    replicates: int = typer.Option(10_000, "--bootstrap", help="Bootstrap replicates."),
    seed: int = typer.Option(20261129, "--seed", help="Bootstrap seed."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document."),
) -> int:
    """Paired comparison of B against A (and the gate verdict with --policy)."""
    spec = BootstrapSpec(replicates=replicates, seed=seed)
    return render_comparison(compare_lmeval(a, b, policy, task, alpha, spec), as_json)
