"""Training throughput of the testbed on one GPU: positions per second per optimizer step.

What is timed is a whole training step as ``training.loop.Trainer.train_step`` runs it
(QAT weight view, batched forward under bf16 autocast, cross-entropy + indexer loss,
backward, clipping, fused AdamW, gate-bias update), on batches drawn beforehand so the
Python example generator is measured apart (its rate is printed too). Variants (eager,
``torch.compile``) are timed in interleaved rounds with alternating order, medians over
rounds; each bucket length of the recipe separately, since a batch has one length, and
each training phase separately (``--phases``): the DSA dense warm-up of the first
``dense_index_steps`` steps attends to up to ``dense_index_topk`` compressed entries, the
sparse phase after it to the config's top-k, so their step costs differ.

    PYTHONPATH=. python benchmarks/train_throughput.py --recipe training/recipes/testbed.toml \\
        --device cuda --variants eager compile --rounds 5 --steps 10

Writes ``benchmarks/results/train-throughput-<device>.json`` and a Markdown note beside it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from benchmarks.prefill import environment
from training.loop import LOG, Trainer
from training.recipe import load_recipe

RESULTS = Path(__file__).resolve().parent / "results"


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _batches(trainer: Trainer, per_length: int) -> tuple[dict[int, list], float]:
    """``per_length`` batches of every bucket length, and examples generated per second."""
    out: dict[int, list] = {n: [] for n in trainer.recipe.lengths}
    started, drawn = time.perf_counter(), 0
    while any(len(v) < per_length for v in out.values()):
        batch = trainer.sampler.next_batch()
        drawn += batch.tokens.shape[0]
        if len(out[batch.tokens.shape[1]]) < per_length:
            out[batch.tokens.shape[1]].append(batch)
    return out, drawn / (time.perf_counter() - started)


def _enter_phase(trainer: Trainer, phase: str) -> None:
    """Put the trainer's step counter inside ``phase`` (what ``Trainer.loss`` branches on)."""
    dense_steps = trainer.recipe.dense_index_steps
    if phase == "dense" and not dense_steps:
        raise SystemExit("--phases dense: the recipe has no dense warm-up (dense_index_steps = 0)")
    trainer.step = 0 if phase == "dense" else dense_steps


def _time_steps(trainer: Trainer, batches: list, device: str) -> float:
    _sync(device)
    started = time.perf_counter()
    for batch in batches:
        trainer.train_step(batch.to(device))
    _sync(device)
    return time.perf_counter() - started


def run(args) -> dict:
    recipe = load_recipe(args.recipe)
    if args.lengths:
        recipe = replace(recipe, lengths=tuple(args.lengths))
    with tempfile.TemporaryDirectory() as tmp:
        return _run(args, recipe, Path(tmp))


def _loop_throughput(trainer: Trainer, steps: int) -> dict:
    """The trainer's own loop (``Trainer.run``: prefetch process, host-to-device copies,
    logging) for ``steps`` sparse-phase steps: positions/s per log window, from its log."""
    _enter_phase(trainer, "sparse")
    trainer.recipe = replace(trainer.recipe, steps=trainer.step + steps,
                             log_every=max(1, steps // 5), save_every=10**9)
    log = trainer.run_dir / LOG
    seen = len(log.read_text().splitlines()) if log.exists() else 0
    trainer.run()
    windows = [json.loads(line) for line in log.read_text().splitlines()[seen:]]
    positions = [w["positions_per_s"] for w in windows if w["positions_per_s"]]
    real = [w["real_tokens_per_s"] for w in windows if w["real_tokens_per_s"]]
    return {"steps": steps, "windows": len(windows), "positions_per_s": positions,
            "median_positions_per_s": statistics.median(positions),
            "median_real_tokens_per_s": statistics.median(real)}


def _run(args, recipe, tmp: Path) -> dict:
    trainers = {v: Trainer(replace(recipe, compile=v.startswith("compile"),
                                   compile_dynamic=(v == "compile_dynamic")), tmp / v, args.device)
                for v in args.variants}
    first = trainers[args.variants[0]]
    batches, examples_per_s = _batches(first, args.steps)
    warm = {}
    for v, tr in trainers.items():  # warm-up: one pass over every shape and phase (compiles)
        started = time.perf_counter()
        for phase in args.phases:
            _enter_phase(tr, phase)
            for n in recipe.lengths:
                seconds = _time_steps(tr, batches[n][:2], args.device)
                print(f"warm-up {v} {phase} length {n}: {seconds:.1f} s", flush=True)
        warm[v] = time.perf_counter() - started
    rows = []
    for phase in args.phases:
        for n in recipe.lengths:
            times = {v: [] for v in args.variants}
            for r in range(args.rounds):
                order = args.variants if r % 2 == 0 else list(reversed(args.variants))
                for v in order:
                    _enter_phase(trainers[v], phase)
                    times[v].append(_time_steps(trainers[v], batches[n], args.device))
            positions = sum(b.tokens.numel() for b in batches[n])
            real = sum(b.real_tokens for b in batches[n])
            for v in args.variants:
                med = statistics.median(times[v])
                rows.append({"variant": v, "phase": phase, "length": n,
                             "rows": batches[n][0].tokens.shape[0],
                             "steps": len(batches[n]), "median_s": med,
                             "positions_per_s": positions / med, "real_tokens_per_s": real / med,
                             "step_ms": 1e3 * med / len(batches[n]), "rounds_s": times[v]})
    loop = {v: _loop_throughput(tr, args.loop_steps) for v, tr in trainers.items()} if args.loop_steps else {}
    peak = torch.cuda.max_memory_allocated() / 2**30 if args.device.startswith("cuda") else None
    return {"benchmark": "train_throughput", "recipe": recipe.to_dict(), "environment": environment(args.device),
            "examples_per_s": examples_per_s, "warmup_s": warm, "peak_memory_gib": peak,
            "rows": rows, "loop": loop}


def markdown(doc: dict, command: str) -> str:
    env = doc["environment"]
    lines = [
        "# Testbed training throughput", "",
        f"Command: `{command}`", "",
        f"Hardware: {env.get('gpu', env['processor'])}; torch {env['torch']}, CUDA {env.get('cuda')}, "
        f"Python {env['python']}; {env['platform']}.", "",
        f"Model: `{doc['recipe']['preset']}` preset; a step = QAT view + forward (bf16 autocast: "
        f"{doc['recipe']['autocast']}) + loss + backward + AdamW + gate-bias update. Batches drawn "
        f"beforehand (example generator alone: {doc['examples_per_s']:.0f} examples/s on one CPU "
        f"thread). Medians of interleaved rounds. Peak GPU memory {doc['peak_memory_gib']} GiB; "
        f"warm-up (compile) seconds: {', '.join(f'{k} {v:.1f}' for k, v in doc['warmup_s'].items())}.", "",
        "| variant | phase | length | rows | ms/step | positions/s | non-pad tokens/s |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in doc["rows"]:
        lines.append(f"| {r['variant']} | {r.get('phase', '?')} | {r['length']} | {r['rows']} | "
                     f"{r['step_ms']:.1f} | "
                     f"{r['positions_per_s']:,.0f} | {r['real_tokens_per_s']:,.0f} |")
    if doc.get("loop"):
        lines += ["", "The trainer's own loop (`Trainer.run`: batches drawn by its prefetch process, copies, "
                  "logging), sparse phase, median over its log windows:", "",
                  "| variant | steps | positions/s | non-pad tokens/s |", "| --- | ---: | ---: | ---: |"]
        for v, r in doc["loop"].items():
            lines.append(f"| {v} | {r['steps']} | {r['median_positions_per_s']:,.0f} | "
                         f"{r['median_real_tokens_per_s']:,.0f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--recipe", default="training/recipes/testbed.toml")
    p.add_argument("--device", default="cuda")
    p.add_argument("--variants", nargs="+", default=["eager"], choices=["eager", "compile", "compile_dynamic"])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--lengths", type=int, nargs="*", default=None,
                   help="bucket lengths to time (default: the recipe's)")
    p.add_argument("--phases", nargs="+", default=["sparse"], choices=["dense", "sparse"],
                   help="training phases to time: the dense warm-up, the sparse phase after it")
    p.add_argument("--loop-steps", type=int, default=0,
                   help="then time the trainer's own loop for this many steps per variant")
    p.add_argument("--out", default=None, help="results folder (default benchmarks/results)")
    args = p.parse_args(argv)
    doc = run(args)
    command = "PYTHONPATH=. python benchmarks/train_throughput.py " + " ".join(argv or sys.argv[1:])
    out = Path(args.out) if args.out else RESULTS
    out.mkdir(parents=True, exist_ok=True)
    stem = f"train-throughput-{args.device.split(':')[0]}"
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / f"{stem}.md").write_text(markdown(doc, command))
    print(markdown(doc, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
