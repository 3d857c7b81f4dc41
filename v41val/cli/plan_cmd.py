"""``v41val plan``: items needed for a non-inferiority gate, and what a full task shows.

Margins and deltas are in accuracy points, the discordance is a fraction (0.03 = 3 %
of items answered differently by the two variants). The task's full size comes from
``--n`` or the fallback table in ``validate.stats.task_sizes``. ``--from-aa A B``
measures the discordance on two lm-eval sample files of the *same* configuration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.text import Text

from v41val.cli import app
from v41val.cli.common import emit
from validate.errors import StatsInputError


@app.command("plan")
def plan(
    task: Optional[str] = typer.Option(None, "--task", help="Task name, e.g. gsm8k."),
    margin: float = typer.Option(..., "--margin", help="Non-inferiority margin in points."),
    discordance: Optional[float] = typer.Option(
        None, "--discordance", help="Share of items the variants answer differently (0.03)."
    ),
    alpha: float = typer.Option(0.05, "--alpha", help="One-sided level of the gate."),
    power: float = typer.Option(0.8, "--power", help="Wanted probability of a PASS."),
    delta: float = typer.Option(0.0, "--delta", help="Assumed true delta B-A in points."),
    n: Optional[int] = typer.Option(None, "--n", help="Full task size (default: by task)."),
    from_aa: Optional[tuple[Path, Path]] = typer.Option(
        None, "--from-aa", help="Two lm-eval sample files/dirs of an A/A run."
    ),
    metric: Optional[str] = typer.Option(
        None, "--metric", help="With --from-aa: e.g. 'exact_match,flexible-extract'."
    ),
    as_json: bool = typer.Option(False, "--json", help="One JSON document."),
) -> None:
    """Print the n a gate needs and the MDE at the task's full size."""
    from validate.lmeval_samples import read_run, select_table
    from validate.stats import pair_outcomes, plan_from_aa, plan_noninferiority, task_size
    from validate.stats.jsonable import json_safe

    if from_aa is not None:
        table_a = select_table(read_run(from_aa[0], "A/A run 1"), task, metric)
        table_b = select_table(read_run(from_aa[1], "A/A run 2"), task, metric)
        paired = pair_outcomes(table_a, table_b)
        result = plan_from_aa(
            paired, task_size(task or paired.task, n), margin / 100.0, alpha, power
        )
    else:
        if discordance is None:
            raise StatsInputError("plan needs --discordance or --from-aa A B")
        if task is None and n is None:
            raise StatsInputError("plan needs --task or --n")
        result = plan_noninferiority(
            task or "task", task_size(task, n), margin / 100.0, discordance, alpha, power,
            delta / 100.0,
        )
    emit(as_json, json_safe(result.to_dict()), lambda console: console.print(Text(result.report()), soft_wrap=True))
