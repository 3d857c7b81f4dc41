"""A/A check of the headline sweep: the same variant options swept several times in one
run, so every ratio vs the first copy should be 1.0 and every CI should contain it.

Variants are swept one after another, and the sweep's paired bootstrap CIs resample
requests within each variant's window; drift of the host between windows (frequency,
other tenants) is outside them. This measures how large that drift is on the machine at
hand: read a real variant's ratio within the A/A spread as "no change".

    python benchmarks/sweep_aa.py --copies 3

Writes ``benchmarks/results/sweep-aa-<device>.json`` and a Markdown note beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

import torch

from benchmarks.records import environment, header, write
from validate.plan import parse_plan
from validate.runner import run_plan
from validate.store import ResultsStore

RESULTS = Path(__file__).resolve().parent / "results"
# The random micro model the recorded results were measured on (the demo's model before it
# moved to the trained testbed): micro with hidden 128, head dim 64, a 32-token window.
MODEL_OVERRIDES = {"hidden_size": 128, "head_dim": 64, "sliding_window": 32}
SPEED = {"sweep_levels": [1, 4, 8], "prompt_tokens": 32, "max_tokens": 16,
         "requests_per_level": 8, "target_tokens_per_s": 20.0}


def plan_document(copies: int, device: str) -> dict:
    """The random micro model, ``copies`` identical exact-mode variants, a one-item task."""
    return {"name": "sweep-aa", "baseline": "copy1", "fidelity_prompts": 0, "seed": 1234,
            "engine": {"kind": "builtin", "preset": "micro", "dtype": "float32", "seed": 0,
                       "device": device,
                       "overrides": dict(MODEL_OVERRIDES)},
            "variants": {f"copy{i + 1}": {"swa": "exact"} for i in range(copies)},
            "tasks": [{"name": "gsm8k_cot_zeroshot", "limit": 1, "max_gen_toks": 2}],
            "speed": dict(SPEED)}


def measure(copies: int, device: str) -> list[dict]:
    plan = parse_plan(plan_document(copies, device), "<sweep-aa>")
    rows = []
    with tempfile.TemporaryDirectory() as d, ResultsStore.open(Path(d) / "r.sqlite") as store:
        run_plan(plan, store)
        for s in sorted(store.sweeps(plan.hash), key=lambda s: s.variant):
            c = s.comparison or {}
            row = {"variant": s.variant,
                   "single_stream_tokens_per_s": s.headline.get("single_stream_tokens_per_s")}
            for key in ("single_stream_speedup", "ttft_speedup", "throughput_ratio"):
                found = c.get(key)
                row[key] = None if not found else {"ratio": found["ratio"], "ci": found["ci"]}
            rows.append(row)
    return rows


def fmt(entry: dict | None) -> str:
    if not entry:
        return "baseline"
    ci = entry["ci"]
    inside = ci is None or ci[0] <= 1.0 <= ci[1]
    ci_s = "no CI" if ci is None else f"[{ci[0]:.2f}, {ci[1]:.2f}]"
    return f"{entry['ratio']:.2f}x {ci_s}{'' if inside else ' (excludes 1)'}"


def markdown(doc: dict) -> str:
    lines = [*header(f"Headline sweep A/A on {doc['device']}", doc),
             f"Sweep: {json.dumps(SPEED)}; {doc['copies']} identical exact-mode variants of "
             "the demo's micro model, swept one after another.", "",
             "| variant | 1-user tok/s ratio [CI] | TTFT speed-up [CI] | throughput at target ratio |",
             "|---|---|---|---|"]
    for r in doc["rows"]:
        lines.append(f"| {r['variant']} | {fmt(r['single_stream_speedup'])} | "
                     f"{fmt(r['ttft_speedup'])} | {fmt(r['throughput_ratio'])} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    rows = measure(args.copies, args.device)
    doc = {"device": args.device, "copies": args.copies, "rows": rows,
           "command": "python " + shlex.join(["benchmarks/sweep_aa.py", *(argv or sys.argv[1:])]),
           "environment": environment(load_before)}
    write(args.out, f"sweep-aa-{args.device}", doc, markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
