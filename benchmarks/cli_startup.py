"""CPU and wall time of short ``v41val`` commands, from process start to exit.

Commands: ``--help``, ``tasks list``, and ``report`` of a small stored run in the
formats a nightly job asks for (terminal, md, html, json, junit). Each runs the real
CLI (what the ``v41val`` console script runs) in a fresh interpreter, so the figure is
what a person or a CI step pays: interpreter start-up, imports, data, analysis,
rendering. The run reported is built here, without a model: two variants on
``gpqa_diamond_cot_zeroshot`` (a registered GPQA task, so a report that asked the task
registry for its data would decrypt GPQA), 198 items, known outcomes and timings.

Rounds are interleaved (round 1 runs every command once, then round 2, ...) so a
change in the machine's load hits all commands alike; medians are reported. CPU is the
child's user + system seconds, the figure the 1 s goal is about (the wall time on a
shared machine also holds other jobs' time). ``--tree DIR`` times another checkout
(e.g. main, exported with ``git archive``) with the same Python, for a before/after.

Usage:

    python benchmarks/cli_startup.py --rounds 7
    python benchmarks/cli_startup.py --rounds 7 --tree /tmp/main-export --label main

Writes ``benchmarks/results/cli-startup-<label>.{json,md}`` (label default: cpu).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parent.parent
CLI = "from v41val.cli import main; main()"  # what the ``v41val`` console script runs
TASK = "gpqa_diamond_cot_zeroshot"
GOAL_CPU_S = 1.0


def stored_run(path: Path, n_items: int = 198) -> None:
    """A complete two-variant run on ``TASK`` with known outcomes and timings."""
    from tasks.request import Generation, GenerationParams, Request
    from validate.engines.base import Timings
    from validate.store import PlannedRequest, ResponseRecord, ResultsStore, ScoreRecord

    gen = GenerationParams(max_gen_toks=64, until=("</s>",), seed=1)
    plan = {"name": "startup-bench", "tasks": [{"name": TASK}], "variants": ["base", "cand"],
            "baseline": "base", "engine": {"kind": "builtin"},
            "policy": {"tasks": {TASK: {"margin": 2.0}}}}
    plan_hash = "5a1ad0c0" * 8
    with ResultsStore.open(path) as store:
        run = store.begin_run(plan_hash, plan_name=plan["name"], seeds=(1,), plan=plan,
                              identity={"git": "bench", "torch": "none"})
        for v_index, variant in enumerate(plan["variants"]):
            store.put_variant(run, variant, {"name": variant}, is_baseline=v_index == 0)
            batch, values = [], []
            for i in range(n_items):
                item = f"rec{i:04d}"
                correct = (i % 3 == 0) != (variant == "cand" and i % 17 == 0)
                req = Request(task=TASK, item_id=item, kind="generate", prompt=f"q {item}",
                              gen=gen)
                ttft = 0.2 + 0.01 * (i % 7) + (0.02 if variant == "cand" else 0.0)
                timings = Timings(started_at_s=run.started_at + i, e2e_s=ttft + 0.3,
                                  ttft_s=ttft, n_prompt_tokens=120, n_output_tokens=31)
                answer = Generation(f"The answer is ({'A' if correct else 'B'})", "stop", 31)
                batch.append((PlannedRequest(variant, 0, req), ResponseRecord(answer, timings)))
                values.append(1.0 if correct else 0.0)
            store.put_responses(run, batch)
            for (planned, _), value in zip(batch, values, strict=True):
                store.put_scores(plan_hash, planned.key,
                                 [ScoreRecord("exact_match,flexible-extract", value)],
                                 scorer=f"{TASK}@1.0")
        store.finish_run(run)


def commands(store: Path) -> dict[str, list[str]]:
    report = ["report", "latest", "--store", str(store)]
    return {"--help": ["--help"], "tasks list": ["tasks", "list"],
            **{f"report -f {f}": [*report, "-f", f] for f in
               ("terminal", "md", "html", "json", "junit")}}


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_one(args: list[str], tree: Path, cwd: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one command in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "160"}
    cpu_before = _children_cpu_s()
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True,
                          env=env, cwd=cwd, check=False)
    wall = time.perf_counter() - start
    cpu = _children_cpu_s() - cpu_before
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-3000:])
        raise SystemExit(f"v41val {' '.join(args)} exited {done.returncode}")
    return wall, cpu


def versions(tree: Path) -> dict:
    from importlib.metadata import version

    git = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True, check=False).stdout.strip()
    return {"python": platform.python_version(),
            **{name: version(name) for name in ("numpy", "scipy", "rich", "typer", "torch",
                                                "matplotlib")},
            "tree": "this checkout" if tree == REPO else str(tree),
            "git": git or "(not a git checkout)"}


def hardware() -> dict:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"machine": platform.machine(), "cpu": model, "cpus": os.cpu_count(),
            "platform": platform.platform()}


def markdown(result: dict) -> str:
    hw, v = result["hardware"], result["versions"]
    lines = [f"# `v41val` start-up: {result['label']}", "",
             f"Command: `{result['command']}`", "",
             f"Hardware: {hw['cpu']}, {hw['cpus']} CPUs ({hw['machine']}); {hw['platform']}",
             "",
             f"Versions: Python {v['python']}, numpy {v['numpy']}, scipy {v['scipy']}, "
             f"rich {v['rich']}, typer {v['typer']}, torch {v['torch']}, matplotlib "
             f"{v['matplotlib']}; tree `{v['tree']}` at {v['git']}"
             + (f" ({result['describe']})" if result.get("describe") else ""), "",
             f"{result['rounds']} interleaved rounds, medians; CPU = the child's user + "
             f"system seconds (goal: under {GOAL_CPU_S:g} s for `tasks list` and `report`). "
             f"The report is of a stored two-variant run on `{TASK}`, {result['items']} "
             "items.", "",
             "| command | CPU median (s) | CPU min-max (s) | wall median (s) |",
             "| --- | ---: | ---: | ---: |"]
    for name, row in result["commands"].items():
        lines.append(f"| `v41val {name}` | {row['cpu_median_s']:.2f} | "
                     f"{min(row['cpu_s']):.2f}-{max(row['cpu_s']):.2f} | "
                     f"{row['wall_median_s']:.2f} |")
    lines += ["", f"Load average (1/5/15 min) before: {result['load_before']}, after: "
              f"{result['load_after']}; run {result['date']}.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tree", type=Path, default=REPO,
                        help="checkout to time (default: this one)")
    parser.add_argument("--label", default="cpu", help="results file: cli-startup-LABEL")
    parser.add_argument("--items", type=int, default=198)
    parser.add_argument("--describe", default="",
                        help="what --tree is (e.g. 'main at 421f154, git archive'), for the note")
    args = parser.parse_args()
    tree = args.tree.resolve()
    with tempfile.TemporaryDirectory(prefix="v41val-startup-bench-") as scratch:
        store = Path(scratch) / "results.sqlite"
        stored_run(store, args.items)
        cmds = commands(store)
        samples = {name: {"wall_s": [], "cpu_s": []} for name in cmds}
        load_before = [round(x, 2) for x in os.getloadavg()]
        for _ in range(args.rounds):
            for name, argv in cmds.items():
                wall, cpu = time_one(argv, tree, Path(scratch))
                samples[name]["wall_s"].append(round(wall, 4))
                samples[name]["cpu_s"].append(round(cpu, 4))
        load_after = [round(x, 2) for x in os.getloadavg()]
    rows = {name: {**s, "cpu_median_s": statistics.median(s["cpu_s"]),
                   "wall_median_s": statistics.median(s["wall_s"])}
            for name, s in samples.items()}
    command = " ".join(["python", "benchmarks/cli_startup.py", "--rounds", str(args.rounds),
                        *(["--tree", str(args.tree)] if tree != REPO else []),
                        *(["--label", args.label] if args.label != "cpu" else [])])
    result = {"label": args.label, "command": command, "rounds": args.rounds,
              "items": args.items, "hardware": hardware(), "versions": versions(tree),
              "load_before": load_before, "load_after": load_after,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "describe": args.describe, "commands": rows}
    print(f"{'command':<28} {'CPU med (s)':>12} {'wall med (s)':>13}")
    for name, row in rows.items():
        print(f"v41val {name:<21} {row['cpu_median_s']:>12.2f} {row['wall_median_s']:>13.2f}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"cli-startup-{args.label}.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / f"cli-startup-{args.label}.md").write_text(markdown(result))


if __name__ == "__main__":
    main()
