"""``v41val plan``: items needed for a non-inferiority gate, and what a full task shows.

Margins and deltas are in accuracy points, the discordance is a fraction (0.03 = 3 %
of items answered differently by the two variants). The task's full size comes from
``--n`` or the fallback table in ``validate.stats.task_sizes``. ``--from-aa A B``
measures the discordance on two lm-eval sample files of the *same* configuration.
``--policy`` (or ``--claims``/``--correction``) sizes for the gate's family; the checks
and the assembly are ``validate.sizing_request`` and ``validate.gate.sizing``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.text import Text

from v41val.cli import app
from v41val.cli.common import emit


@app.command("plan")
def plan(
    task: Optional[str] = typer.Option(None, "--task", help="Task name, e.g. gsm8k."),
    margin: Optional[float] = typer.Option(
        None, "--margin", help="Non-inferiority margin in points (not with --policy)."),
    discordance: Optional[float] = typer.Option(
        None, "--discordance", help="Share of items the variants answer differently (0.03)."
    ),
    alpha: Optional[float] = typer.Option(
        None, "--alpha", help="One-sided level of the gate, in (0, 0.5) (default 0.05 or "
        "the policy's)."),
    power: Optional[float] = typer.Option(
        None, "--power", help="Wanted probability of a PASS (default 0.8 or the policy's)."),
    delta: float = typer.Option(0.0, "--delta", help="Assumed true delta B-A in points."),
    n: Optional[int] = typer.Option(None, "--n", help="Full task size (default: by task)."),
    from_aa: Optional[tuple[Path, Path]] = typer.Option(
        None, "--from-aa", help="Two lm-eval sample files/dirs of an A/A run."
    ),
    metric: Optional[str] = typer.Option(
        None, "--metric", help="With --from-aa: e.g. 'exact_match,flexible-extract'."
    ),
    policy: Optional[Path] = typer.Option(
        None, "--policy", help="Gate policy: size every task for the gate's family."),
    variants: int = typer.Option(
        1, "--variants", help="Optimizations gated together (each one claim per task)."),
    claims: int = typer.Option(
        1, "--claims", help="Without --policy: claims in the gate's family (tasks x "
        "optimizations)."),
    correction: Optional[str] = typer.Option(
        None, "--correction", help="holm | bonferroni | none (default holm or the policy's)."),
    repeats: list[str] = typer.Option(
        [], "--repeats", help="Rows per item: N for every task, or TASK=N (repeatable)."),
    rho: Optional[float] = typer.Option(
        None, "--rho", help="With repeats: within-item correlation of B-A in [0, 1] "
        "(default 0; from the pilot with --from-aa)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document."),
) -> None:
    """Print the n a gate needs and the MDE at the task's full size."""
    from validate.sizing_request import PlanRequest, check_request, parse_repeats

    request = PlanRequest(
        margin_points=margin, discordance=discordance, alpha=alpha, power=power,
        delta_points=delta, n=n, task=task, claims=claims, correction=correction,
        repeats=parse_repeats(repeats), rho=rho,
        policy=None if policy is None else str(policy), variants=variants)
    check_request(request)  # before any file is read or statistics load
    from validate.gate.sizing import make_plan
    from validate.lmeval_samples import read_run, select_table
    from validate.stats import pair_outcomes
    from validate.stats.jsonable import json_safe

    paired = None
    if from_aa is not None:
        table_a = select_table(read_run(from_aa[0], "A/A run 1"), task, metric)
        table_b = select_table(read_run(from_aa[1], "A/A run 2"), task, metric)
        paired = pair_outcomes(table_a, table_b)
    result = make_plan(request, paired)
    emit(as_json, json_safe(result.to_dict()),
         lambda console: console.print(Text(result.report()), soft_wrap=True))
