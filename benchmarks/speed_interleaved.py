"""A/A check of interleaved speed rounds: identical variants served in alternating
rounds (A B C, C B A, ...), each speed-up's interval resampling rounds
(``validate/speed/interleaved.py``). Every ratio vs the first copy should be 1.0 and
every interval should contain it; compare with ``sweep_aa.py``, whose variants are
swept one after another and whose ratios moved 0.85x-1.01x on this machine.

    python benchmarks/speed_interleaved.py --copies 3 --rounds 8 --concurrency 4

Writes ``benchmarks/results/speed-interleaved-aa-<device>.json`` and a Markdown note.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

from benchmarks.records import environment, header, write
from benchmarks.sweep_aa import RESULTS, SPEED, plan_document
from validate.plan import parse_plan
from validate.runner.engines import BuiltinFactory
from validate.speed.builtin_sweep import synthetic_requests
from validate.speed.interleaved import METRICS, interleaved_rounds, interleaved_speedup
from validate.speed.sweep import warm_up


def measure(copies: int, rounds: int, concurrency: int, device: str) -> list[dict]:
    plan = parse_plan(plan_document(copies, device), "<speed-interleaved-aa>")
    factory = BuiltinFactory(plan)
    requests = synthetic_requests(SPEED["requests_per_level"], SPEED["prompt_tokens"],
                                  SPEED["max_tokens"], seed=plan.seed)
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
    lines = [*header(f"Interleaved speed rounds, A/A, on {doc['device']}", doc),
             f"{doc['copies']} identical exact-mode variants of the micro model "
             f"(benchmarks/sweep_aa.py's), {doc['rounds']} rounds in alternating order, "
             f"{SPEED['requests_per_level']} synthetic requests of {SPEED['prompt_tokens']} "
             f"prompt / {SPEED['max_tokens']} output tokens per pass at concurrency "
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
    parser.add_argument("--copies", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    rows = measure(args.copies, args.rounds, args.concurrency, args.device)
    doc = {"device": args.device, "copies": args.copies, "rounds": args.rounds,
           "concurrency": args.concurrency, "rows": rows,
           "command": "python " + " ".join(["benchmarks/speed_interleaved.py",
                                            *(argv or sys.argv[1:])]),
           "environment": environment(load_before)}
    write(args.out, f"speed-interleaved-aa-{args.device}", doc, markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
