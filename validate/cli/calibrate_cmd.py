"""``v41val calibrate``: plant known degradations (logit noise, a shrunk window) and show
which ones the fidelity metrics detect at this n. Thin: parse, call
``validate.fidelity.calibrate``, render."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from validate.cli import app
from validate.cli.common import emit


def _numbers(text: str, kind: type) -> list:
    return [kind(x) for x in text.split(",") if x.strip()] if text else []


@app.command("calibrate")
def calibrate(
    preset: Optional[str] = typer.Option(None, "--preset", help="micro | tiny | mid | flash"),
    seed: int = typer.Option(0, "--seed", help="Seed of the random weights."),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", help="Checkpoint directory."),
    swa: str = typer.Option("exact", "--swa", help="exact | bounded (the variant calibrated)."),
    task: str = typer.Option("gsm8k_cot_zeroshot", "--task", help="Task whose prompts are used."),
    limit: int = typer.Option(8, "--limit", help="Number of items (prompts)."),
    noise: str = typer.Option("0.01,0.1,1", "--noise", help="Logit-noise levels (std)."),
    drop_window: str = typer.Option("", "--drop-window", help="Window drops (tokens)."),
    max_new_tokens: int = typer.Option(8, "--max-new-tokens", help="Tokens per prompt."),
    alpha: float = typer.Option(0.05, "--alpha", help="One-sided level of detection."),
    device: str = typer.Option("cpu", "--device", help="cpu | cuda"),
    as_json: bool = typer.Option(False, "--json", help="One JSON document."),
) -> None:
    """Which planted degradations does this run size detect?"""
    import tasks
    from runtime.options import RuntimeOptions
    from validate.engines.builtin import BuiltinEngineConfig
    from validate.engines.builtin_source import ModelSource
    from validate.fidelity.calibrate import calibrate as run_calibration
    from validate.fidelity.calibrate import planted_levels

    source = ModelSource(preset=None if checkpoint else (preset or "tiny"), seed=seed,
                         checkpoint=str(checkpoint) if checkpoint else None, device=device)
    the_task = tasks.get(task)
    requests = [the_task.render(item) for item in the_task.items()[:limit]]
    config = BuiltinEngineConfig(source=source, options=RuntimeOptions(swa=swa))
    result = run_calibration(config, requests,
                             planted_levels(_numbers(noise, float), _numbers(drop_window, int)),
                             alpha=alpha, max_new_tokens=max_new_tokens)

    def render(console) -> None:
        table = Table(title=f"calibration: {task}, n={result.n_prompts} prompts, "
                            f"alpha={alpha} (one-sided)")
        for col in ("planted", "KL mean ± SE", "KL p99", "top-1 agree", "detected"):
            table.add_column(col)
        for level in result.levels:
            f = level.fidelity
            kl = "n/a" if f.kl_mean is None else f"{f.kl_mean:.4g} ± {f.kl_se or 0:.2g}"
            table.add_row(level.label, kl, "n/a" if f.kl_p99 is None else f"{f.kl_p99:.4g}",
                          "n/a" if f.top1_agreement is None else f"{f.top1_agreement:.3f}",
                          "yes" if level.detected else "no")
        console.print(table)
        console.print("A/A control clean" if result.control_clean else
                      "[red]A/A control NOT clean: the measurement itself diverges[/red]")

    emit(as_json, result.to_dict(), render)
