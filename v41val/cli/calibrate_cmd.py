"""``v41val calibrate``: plant known degradations and show what this run size detects.

Default (fidelity): logit noise and a shrunk window against the unperturbed variant,
detected by the teacher-forced KL (``validate.fidelity.calibrate``).

``--quality``: the same families plus a bounded replay that reads k positions short
(``--replay-short``), run on the task's items through the builtin engine (warm, greedy,
resumable in ``--workspace``), then gated on seeded subsets of n items; per n the
observed detection rate beside the exact predictions (``validate.calibration``).

Thin: parse, call the library, render."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from v41val.cli import app
from v41val.cli.common import EXIT_INTERRUPTED, emit, notice
from v41val.cli.progress import shown_progress
from validate.errors import ValidateInputError
from validate.userpaths import check_output_file, write_text_file


def _numbers(text: str, kind: type, flag: str) -> list:
    """A comma-separated list of ``kind`` numbers; a one-line error naming ``flag``."""
    out = []
    for part in (text or "").split(","):
        if not part.strip():
            continue
        try:
            out.append(kind(part.strip()))
        except ValueError:
            what = "integers" if kind is int else "numbers"
            raise ValidateInputError(f"{flag}: expected comma-separated {what}, got "
                                     f"{part.strip()!r}") from None
    return out


def _positive(values: list, flag: str) -> list:
    for v in values:
        if v < 1:
            raise ValidateInputError(f"{flag}: expected values >= 1, got {v}")
    return values


@app.command("calibrate")
def calibrate(
    preset: str = typer.Option("testbed", "--preset",
                                         help="testbed (the trained checkpoint, the default) | "
                                              "micro | tiny | mid | flash (random weights)"),
    seed: int = typer.Option(0, "--seed", help="Seed of the random weights."),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", help="Checkpoint directory."),
    swa: str = typer.Option("exact", "--swa", help="exact | bounded (the variant calibrated; "
                                                   "fidelity mode)."),
    task: str = typer.Option("testbed_arith", "--task", help="Task whose items are used."),
    limit: int = typer.Option(8, "--limit", help="Number of items (prompts)."),
    noise: str = typer.Option("0.01,0.1,1", "--noise", help="Logit-noise levels (std)."),
    drop_window: str = typer.Option("", "--drop-window", help="Window drops (tokens)."),
    max_new_tokens: Optional[int] = typer.Option(
        None, "--max-new-tokens",
        help="Tokens per prompt (default: 8 in fidelity mode, the task's budget with --quality)."),
    alpha: Optional[float] = typer.Option(None, "--alpha",
                                          help="One-sided level of detection (default 0.05; "
                                               "with --quality and --policy, the policy's)."),
    device: str = typer.Option("cpu", "--device", help="cpu | cuda"),
    quality: bool = typer.Option(False, "--quality",
                                 help="Calibrate the quality gate: detection rate against "
                                      "planted size and n, beside plan's prediction."),
    replay_short: str = typer.Option("", "--replay-short",
                                     help="--quality: bounded replay k positions short "
                                          "(replay_tokens = W - k), e.g. 1,2,4,8."),
    sizes: str = typer.Option("50,100,200,500", "--n",
                              help="--quality: subset sizes n (beyond --limit: predictions only)."),
    draws: int = typer.Option(400, "--draws", help="--quality: seeded subsets per n."),
    subsample_seed: int = typer.Option(0, "--subsample-seed", help="--quality: seed of the "
                                                                    "subsets."),
    margin: Optional[float] = typer.Option(None, "--margin",
                                           help="--quality: margin in points (default 2.0; "
                                                "or --policy)."),
    policy: Optional[Path] = typer.Option(None, "--policy",
                                          help="--quality: gate policy file (margin, alpha, "
                                               "correction, health) instead of --margin."),
    metric: Optional[str] = typer.Option(None, "--metric", help="--quality: metric gated "
                                                                "(default: the task's primary)."),
    workspace: Optional[Path] = typer.Option(None, "--workspace",
                                             help="--quality: keep the results store here "
                                                  "(a rerun resumes); default: a temporary "
                                                  "directory."),
    concurrency: int = typer.Option(8, "--concurrency", help="--quality: requests batched."),
    markdown: Optional[Path] = typer.Option(None, "--markdown",
                                            help="--quality: also write the tables as "
                                                 "Markdown to this file."),
    as_json: bool = typer.Option(False, "--json", help="One JSON document."),
) -> int:
    """Which planted degradations does this run size detect?"""
    from validate.interrupt import stop_on_interrupt

    noise_levels = _numbers(noise, float, "--noise")
    drops = _numbers(drop_window, int, "--drop-window")
    for flag, value in (("--limit", limit), ("--max-new-tokens", max_new_tokens),
                        ("--concurrency", concurrency)):
        if value is not None and value < 1:
            raise ValidateInputError(f"{flag}: expected >= 1, got {value}")
    if quality:
        if markdown is not None:
            check_output_file(markdown, "--markdown")
        if policy is not None and (margin is not None or alpha is not None):
            raise ValidateInputError("--quality: give --policy or --margin/--alpha, not both")
        shorts = _positive(_numbers(replay_short, int, "--replay-short"), "--replay-short")
        ns = _positive(_numbers(sizes, int, "--n"), "--n")
        if not ns:
            raise ValidateInputError("--n: give at least one subset size")
        if draws < 1:
            raise ValidateInputError(f"--draws: expected >= 1, got {draws}")
        work = partial(
            _quality, preset=preset, seed=seed, checkpoint=checkpoint, device=device, task=task,
            limit=limit, noise=noise_levels, drops=drops, shorts=shorts, ns=ns, draws=draws,
            subsample_seed=subsample_seed, margin=margin, policy=policy, metric=metric,
            alpha=0.05 if alpha is None else alpha, workspace=workspace, concurrency=concurrency,
            max_new_tokens=max_new_tokens, markdown=markdown)
    else:
        if replay_short:
            raise ValidateInputError("--replay-short needs --quality")
        work = partial(
            _fidelity, preset=preset, seed=seed, checkpoint=checkpoint, swa=swa, task=task, limit=limit,
            noise=noise_levels, drops=drops,
            max_new_tokens=8 if max_new_tokens is None else max_new_tokens,
            alpha=0.05 if alpha is None else alpha, device=device)
    try:
        with stop_on_interrupt(notice), shown_progress(as_json) as progress:
            result, render = work(progress=progress)
    except KeyboardInterrupt:
        notice("stopped" + (": responses so far are kept in --workspace; the same command "
                            "again resumes" if quality and workspace else ""))
        return EXIT_INTERRUPTED
    emit(as_json, result.to_dict(), render)
    return 0


def _fidelity(*, preset, seed, checkpoint, swa, task, limit, noise, drops, max_new_tokens, alpha,
              device, progress):
    """(result, render) of the fidelity calibration."""
    import tasks
    from runtime.options import RuntimeOptions
    from validate.engines.builtin import BuiltinEngineConfig
    from validate.engines.builtin_source import ModelSource
    from validate.fidelity.calibrate import calibrate as run_calibration
    from validate.fidelity.calibrate import planted_levels

    source = ModelSource(preset=None if checkpoint else preset, seed=seed,
                         checkpoint=str(checkpoint) if checkpoint else None, device=device)
    the_task = tasks.get(task)
    requests = [the_task.render(item) for item in the_task.items()[:limit]]
    config = BuiltinEngineConfig(source=source, options=RuntimeOptions(swa=swa))
    result = run_calibration(config, requests, planted_levels(noise, drops),
                             alpha=alpha, max_new_tokens=max_new_tokens, progress=progress)

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

    return result, render


def _quality(*, preset, seed, checkpoint, device, task, limit, noise, drops, shorts, ns, draws,
             subsample_seed, margin, policy, metric, alpha, workspace, concurrency,
             max_new_tokens, markdown, progress):
    """(result, render) of the quality calibration."""
    import tempfile
    from dataclasses import replace

    from validate.calibration import render as tables
    from validate.calibration.planted import planted_quality_levels
    from validate.calibration.quality import quality_calibration, quality_policy
    from validate.engines.builtin_source import ModelSource
    from validate.gate import load_policy

    engine = ({"checkpoint": str(checkpoint)} if checkpoint else
              {"preset": preset, **({} if preset == "testbed" else {"seed": seed})})
    engine["device"] = device
    window = ModelSource(preset=engine.get("preset"), seed=seed,
                         checkpoint=engine.get("checkpoint"), device=device).config().sliding_window
    levels = planted_quality_levels(window, noise=noise, drop_window=drops, replay_short=shorts,
                                    seed=seed)
    gate_policy = quality_policy(task, policy=load_policy(policy) if policy else None,
                                 margin_points=2.0 if margin is None else margin, alpha=alpha,
                                 metric=metric)
    with tempfile.TemporaryDirectory(prefix="v41val-calibrate-") as scratch:
        result = quality_calibration(
            engine, levels, task, limit, gate_policy, ns,
            workspace=Path(workspace) if workspace else Path(scratch), draws=draws,
            seed=subsample_seed, max_gen_toks=max_new_tokens, concurrency=concurrency,
            progress=progress)
    if workspace is None:  # the scratch store is gone: do not point at it
        result = replace(result, store=None)
    if markdown is not None:
        write_text_file(markdown, tables.markdown(result), "--markdown")

    def render(console) -> None:
        console.print(tables.headline(result))
        for head, rows, title in [(*tables.summary_table(result), "pairs on the whole pool"),
                                  *[(*tables.per_n_table(result, w), tables.TITLES[w])
                                    for w in ("fail", "worse", "pass")]]:
            table = Table(title=title)
            for col in head:
                table.add_column(col)
            for row in rows:
                table.add_row(*row)
            console.print(table)
        for note in tables.notes(result):
            console.print(f"note: {note}", soft_wrap=True)

    return result, render
