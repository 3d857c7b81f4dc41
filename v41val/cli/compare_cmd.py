"""``v41val compare A B``: paired statistics of two variants, and the gate with --policy.

A and B are lm-eval ``--log_samples`` files or directories (paired by doc id and
prompt hash), or, with ``--store FILE [--run ID]``, two variant names of one stored run
(a plan run by ``v41val run`` or an lm-eval import). With ``--policy`` the release gate
runs and the exit code is the run decision: 0 GO, 1 NO-GO, 3 INCONCLUSIVE, 4 INVALID
(2: bad input).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.text import Text

from v41val.cli import app
from v41val.cli.common import emit


def render_comparison(result, as_json: bool) -> int:
    from validate.stats.jsonable import json_safe

    emit(as_json, json_safe(result.to_dict()), lambda console: console.print(Text(result.report()), soft_wrap=True))
    return result.exit_code


@app.command("compare")
def compare(
    a: str = typer.Argument(..., help="Baseline: lm-eval samples file or directory, "
                                      "or a variant name with --store."),
    b: str = typer.Argument(..., help="Candidate: lm-eval samples file or directory, "
                                      "or a variant name with --store."),
    store: Optional[Path] = typer.Option(None, "--store", help="Results store (SQLite): "
                                         "compare two variants of a stored run."),
    run: Optional[str] = typer.Option(None, "--run", help="Run id or plan hash (prefix) in "
                                      "--store (default: the latest run)."),
    policy: Optional[Path] = typer.Option(None, "--policy", help="Gate policy (TOML)."),
    task: Optional[str] = typer.Option(None, "--task", help="Only this task."),
    alpha: float = typer.Option(0.05, "--alpha", help="Two-sided level of the CIs."),
    replicates: int = typer.Option(10_000, "--bootstrap", help="Bootstrap replicates."),
    seed: int = typer.Option(20261129, "--seed", help="Bootstrap seed."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document."),
) -> int:
    """Paired comparison of B against A (and the gate verdict with --policy)."""
    from validate.analysis.compare_stored import compare_stored, open_store
    from validate.gate.from_lmeval import compare_lmeval
    from validate.stats import BootstrapSpec

    spec = BootstrapSpec(replicates=replicates, seed=seed)
    if store is not None:
        with open_store(store) as results:
            result = compare_stored(results, run, a, b, policy, task, alpha, spec)
        return render_comparison(result, as_json)
    if run is not None:
        raise typer.BadParameter("--run needs --store")
    return render_comparison(compare_lmeval(Path(a), Path(b), policy, task, alpha, spec), as_json)
