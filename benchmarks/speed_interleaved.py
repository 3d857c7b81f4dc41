"""A/A check of interleaved speed rounds: identical variants served in alternating
rounds (A B C, C B A, ...), each speed-up's interval resampling rounds
(``validate/speed/interleaved.py``). Every ratio vs the first copy should be 1.0 and
every interval should contain it; compare with ``sweep_aa.py``, whose variants are
swept one after another and whose ratios moved 0.85x-1.01x on this machine.

    python benchmarks/speed_interleaved.py --copies 3 --rounds 8 --concurrency 4
    python benchmarks/speed_interleaved.py --settings demo --copies 3

``--settings demo`` runs the check at ``v41val demo``'s own round settings instead: its
trained testbed model, its engine options and its ``[speed]`` (2 cold 64-token prompts,
8 output tokens, 8 rounds, one batch per round), copies of its exact baseline.

Writes ``benchmarks/results/speed-interleaved-aa-<device>[-demo].json`` and a Markdown note.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

import torch

from benchmarks.records import environment, header, write
from benchmarks.sweep_aa import RESULTS, SPEED, plan_document
from validate.demo.plan import CONCURRENCY as DEMO_CONCURRENCY
from validate.demo.plan import SPEED as DEMO_SPEED
from validate.demo.plan import plan_document as demo_plan_document
from validate.plan import parse_plan
from validate.runner.engines import BuiltinFactory
from validate.speed.builtin_sweep import synthetic_requests
from validate.speed.interleaved import METRICS, interleaved_rounds, interleaved_speedup
from validate.speed.sweep import warm_up


def settings_document(settings: str, copies: int, device: str) -> tuple[dict, dict]:
    """(plan document, speed settings): the micro model's A/A plan, or the demo's plan
    with its variants replaced by ``copies`` copies of its exact baseline."""
    if settings == "micro":
        return plan_document(copies, device), SPEED
    doc = demo_plan_document(device=device)
    doc["variants"] = {f"copy{i + 1}": {"swa": "exact"} for i in range(copies)}
    doc["baseline"] = "copy1"
    return doc, DEMO_SPEED


def measure(copies: int, rounds: int, concurrency: int, device: str, settings: str = "micro") -> list[dict]:
    document, speed = settings_document(settings, copies, device)
    plan = parse_plan(document, f"<speed-interleaved-aa {settings}>")
    factory = BuiltinFactory(plan)
    requests = synthetic_requests(speed["requests_per_level"], speed["prompt_tokens"],
                                  speed["max_tokens"], seed=plan.seed)
    engines = {v.name: (lambda v=v: factory.sweep_engine(v, concurrency))
               for v in plan.variants}
    for v in plan.variants:  # untimed: one-off costs of every batch shape
        warm_up(lambda level, v=v: factory.sweep_engine(v, level), requests, [concurrency])
    measured = interleaved_rounds(engines, requests, rounds)
    rows = []
    for v in plan.variant_names[1:]:
        row = {"variant": v}
        for metric in METRICS:
            r = interleaved_speedup(measured, plan.baseline, v, metric)
            row[metric] = {"ratio": r.ratio, "ci": list(r.ci_bootstrap), "rounds": r.n_items}
        rows.append(row)
    return rows


def cell(entry: dict) -> str:
    lo, hi = entry["ci"]
    inside = lo <= 1.0 <= hi
    return f"{entry['ratio']:.3f}x [{lo:.3f}, {hi:.3f}]{'' if inside else ' (excludes 1)'}"


def markdown(doc: dict) -> str:
    speed = DEMO_SPEED if doc.get("settings") == "demo" else SPEED
    model = ("the demo's trained testbed (v41val demo's plan and round settings)" if doc.get("settings") == "demo"
             else "the micro model (benchmarks/sweep_aa.py's)")
    lines = [*header(f"Interleaved speed rounds, A/A, on {doc['device']}", doc),
             f"{doc['copies']} identical exact-mode variants of {model}, {doc['rounds']} rounds in alternating order, "
             f"{speed['requests_per_level']} synthetic requests of {speed['prompt_tokens']} "
             f"prompt / {speed['max_tokens']} output tokens per pass at concurrency "
             f"{doc['concurrency']}; latency speed-ups vs copy1 (> 1: faster), 95 % "
             "percentile bootstrap over rounds.", "",
             "| variant | TTFT speed-up [CI] | TPOT speed-up [CI] | e2e speed-up [CI] |",
             "|---|---|---|---|"]
    for r in doc["rows"]:
        lines.append(f"| {r['variant']} | {cell(r['ttft_s'])} | {cell(r['tpot_s'])} | "
                     f"{cell(r['e2e_s'])} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", choices=("micro", "demo"), default="micro",
                        help="micro: the micro model's A/A plan; demo: v41val demo's model and round settings")
    parser.add_argument("--copies", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=None, help="default: 8 (the demo's own with --settings demo)")
    parser.add_argument("--concurrency", type=int, default=None,
                        help="default: 4 (the demo's own with --settings demo)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    demo = args.settings == "demo"
    rounds = args.rounds or (DEMO_SPEED["rounds"] if demo else 8)
    concurrency = args.concurrency or (DEMO_CONCURRENCY if demo else 4)
    load_before = os.getloadavg()[0]
    rows = measure(args.copies, rounds, concurrency, args.device, args.settings)
    doc = {"device": args.device, "copies": args.copies, "rounds": rounds, "settings": args.settings,
           "concurrency": concurrency, "rows": rows,
           "command": "python " + shlex.join(["benchmarks/speed_interleaved.py", *(argv or sys.argv[1:])]),
           "environment": environment(load_before)}
    write(args.out, f"speed-interleaved-aa-{args.device}{'-demo' if demo else ''}", doc, markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
