"""Wall time of ``v41val demo`` end to end, the way a new user runs it.

Each repeat runs the real CLI (what the ``v41val`` console script runs, ``demo --json``) in a fresh
process and a fresh temporary workspace (a reused workspace would resume from its store
and measure nothing), so the figure includes Python start-up, imports, loading the
shipped data, every variant, fidelity, analysis and rendering.

The machine may be shared: beside the wall time the script records the child process's
CPU seconds (user + system) and the load average before and after each repeat. With
one torch thread, CPU seconds approximate the wall time the same run would take on an
idle 2-core machine; the wall time is what this machine gave at that moment.

Usage:

    python benchmarks/demo.py --repeats 3              # the default demo
    python benchmarks/demo.py --items 40 --repeats 1   # a smaller one

Writes ``benchmarks/results/demo-<device>.json`` and a Markdown note next to it.
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
BUDGET_S = 180.0
CLI = "from v41val.cli import main; main()"  # what the ``v41val`` console script runs


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_run(args: argparse.Namespace) -> dict:
    """One ``v41val demo`` in a fresh process and workspace."""
    with tempfile.TemporaryDirectory(prefix="v41val-demo-bench-") as workspace:
        command = [sys.executable, "-c", CLI, "demo", "--items", str(args.items),
                   "--workspace", workspace, "--device", args.device, "--json",
                   "--threads", str(args.threads)]
        load_before = os.getloadavg()
        cpu_before = _children_cpu_s()
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        cpu = _children_cpu_s() - cpu_before
        load_after = os.getloadavg()
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"v41val demo exited {done.returncode}")
    doc = json.loads(done.stdout)
    return {"wall_s": wall, "cpu_s": cpu, "demo_wall_s": doc["demo"]["wall_s"],
            "load_before": list(load_before), "load_after": list(load_after),
            "decision": doc["decision"], "variants": doc["demo"]["variants"],
            "floor_tasks": doc["floor_tasks"],
            "tasks": {t["task"]: t["variants"][0]["n_items"] for t in doc["tasks"]},
            "command": " ".join(["v41val", *command[3:]])}


def environment() -> dict:
    import torch

    return {"python": platform.python_version(), "torch": torch.__version__,
            "platform": platform.platform(), "processor": platform.machine(),
            "cpu_count": os.cpu_count()}


def markdown(result: dict) -> str:
    runs = result["runs"]
    env = result["environment"]
    lines = [
        f"# `v41val demo` end to end on {result['settings']['device']}",
        "",
        f"Command: `python benchmarks/demo.py --items {result['settings']['items']} "
        f"--repeats {len(runs)} --threads {result['settings']['threads']}` (each repeat: "
        f"`{runs[0]['command']}` in a fresh process and workspace)",
        "",
        f"Hardware: {env['processor']}, {env['cpu_count']} CPUs; {env['platform']}; "
        f"Python {env['python']}, torch {env['torch']}",
        "",
        f"Items: {runs[0]['tasks']}; variants: {', '.join(runs[0]['variants'])}",
        "",
        "| repeat | wall (s) | CPU (s) | load before (1/5/15 min) | load after | decision |",
        "| ---: | ---: | ---: | --- | --- | --- |",
    ]
    for i, r in enumerate(runs, 1):
        lines.append(f"| {i} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | "
                     f"{' / '.join(f'{x:.1f}' for x in r['load_before'])} | "
                     f"{' / '.join(f'{x:.1f}' for x in r['load_after'])} | {r['decision']} |")
    lines += [
        "",
        f"Median wall: **{result['median_wall_s']:.1f} s**; median CPU: "
        f"**{result['median_cpu_s']:.1f} s** (budget {BUDGET_S:.0f} s).",
        "",
        "Wall time is what this machine gave while other jobs ran; with one torch thread the",
        "CPU seconds are close to the wall time of the same run on an idle 2-core machine.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=None,
                        help="--items of the demo (default: the demo's own default)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON path (default benchmarks/results/demo-<device>.json)")
    args = parser.parse_args(argv)
    if args.items is None:
        from validate.demo.plan import DEFAULT_ITEMS

        args.items = DEFAULT_ITEMS
    runs = []
    for i in range(args.repeats):
        runs.append(one_run(args))
        r = runs[-1]
        print(f"repeat {i + 1}: wall {r['wall_s']:.1f} s, CPU {r['cpu_s']:.1f} s, load "
              f"{r['load_before'][0]:.1f} -> {r['load_after'][0]:.1f}", file=sys.stderr)
    result = {"settings": {"items": args.items, "repeats": args.repeats,
                           "threads": args.threads, "device": args.device},
              "environment": environment(), "runs": runs,
              "median_wall_s": statistics.median(r["wall_s"] for r in runs),
              "median_cpu_s": statistics.median(r["cpu_s"] for r in runs),
              "budget_s": BUDGET_S, "date": time.strftime("%Y-%m-%d")}
    out = args.out or RESULTS / f"demo-{args.device}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
