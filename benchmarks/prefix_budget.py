"""The cost side of bounded replay: prefix-cache bytes per cached token, exact vs
bounded, and the hit rate a fixed cache budget buys on a real workload's prompts
(``runtime/prefix_budget.py``, ``KVBytes.prefix_cache_bytes_per_token``).

    python benchmarks/prefix_budget.py --task testbed_lookup --items 300 --passes 2

``--passes 2`` plays the prompts twice in order, as a plan's warm mode does (a priming
pass, then the measured one); 1 is a cold stream of distinct prompts.

Bytes come from two configs: the testbed's own (the model the workload was made for)
and ``flash`` (the released dimensions; its 128-token window and 64-token blocks). The
budgets are fractions of what exact mode needs to hold every block of the workload.
Writes ``benchmarks/results/prefix-budget-<task>.json`` and a Markdown note.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import tasks
from benchmarks.records import write
from runtime.config import V41Config
from runtime.kv_bytes import kv_bytes_per_token
from runtime.prefix_budget import budget_hit_rates
from validate.engines.builtin_source import ModelSource

RESULTS = Path(__file__).resolve().parent / "results"
BLOCK = 64
FRACTIONS = (0.02, 0.05, 0.1, 0.25, 1.0)
NOTES = (
    "- Hit rate is what the cache found; saved is what prefill skipped. Bounded replay "
    "recomputes W tokens per hit and ignores hits of at most W, so at the same hits it "
    "saves less; its gain is the budget: a cached token costs only the persistent KV.",
    "- Two passes in order are a cyclic scan, which an LRU serves only once the whole "
    "working set fits: below that, the second pass finds only the prefix all prompts "
    "share, hence the jump between budgets.",
)


def prompts_of(task_name: str, items: int) -> list[list[int]]:
    task = tasks.get(task_name)
    tokenizer = ModelSource(preset="testbed").tokenizer()
    return [list(tokenizer.encode(task.render(item).prompt)) for item in task.items()[:items]]


def measure(prompts: list[list[int]]) -> list[dict]:
    blocks = sum(len(p) // BLOCK for p in {tuple(p) for p in prompts})  # distinct prompts
    rows = []
    for preset in ("testbed", "flash"):
        kv = kv_bytes_per_token(V41Config.preset(preset))
        full = blocks * BLOCK * kv.prefix_cache_bytes_per_token(True, BLOCK)
        for fraction in FRACTIONS:
            exact, bounded = budget_hit_rates(prompts, kv, fraction * full, BLOCK)
            rows.append({"config": preset, "window": kv.sliding_window,
                         "budget_fraction_of_exact_full": fraction,
                         "exact": exact.to_dict(), "bounded": bounded.to_dict()})
    return rows


def markdown(doc: dict) -> str:
    lines = [f"# Prefix-cache cost, exact vs bounded: {doc['task']}", "",
             f"Command: `{doc['command']}`", "",
             f"{doc['items']} prompts of `{doc['task']}` (testbed byte tokenizer, "
             f"{doc['passes']} pass(es), {doc['prompt_tokens']} prompt tokens in all), "
             f"{BLOCK}-token blocks, played in order through an LRU of chained blocks (tail blocks evicted first). Budget: a "
             "fraction of the bytes exact mode needs to hold every block of the workload. "
             "Saved: prefill tokens not computed (bounded: H - W per hit of H > W).", "",
             "| config (W) | B/token exact | B/token bounded | budget | blocks exact / "
             "bounded | hit rate exact / bounded | saved exact / bounded |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in doc["rows"]:
        e, b = r["exact"], r["bounded"]
        lines.append(
            f"| {r['config']} ({r['window']}) | {e['bytes_per_token']:.0f} | "
            f"{b['bytes_per_token']:.0f} | {100 * r['budget_fraction_of_exact_full']:g} % | "
            f"{e['capacity_blocks']} / {b['capacity_blocks']} | "
            f"{100 * e['hit_rate']:.1f} % / {100 * b['hit_rate']:.1f} % | "
            f"{100 * e['saved_rate']:.1f} % / {100 * b['saved_rate']:.1f} % |")
    return "\n".join(lines + ["", "## How to read it", "", *NOTES]) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="testbed_lookup")
    parser.add_argument("--items", type=int, default=300)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    prompts = prompts_of(args.task, args.items) * args.passes
    doc = {"task": args.task, "items": len(prompts) // args.passes, "passes": args.passes,
           "prompt_tokens": sum(len(p) for p in prompts), "block_tokens": BLOCK,
           "rows": measure(prompts),
           "command": "python " + shlex.join(["benchmarks/prefix_budget.py", *(argv or sys.argv[1:])])}
    write(args.out, f"prefix-budget-{args.task}-{args.passes}pass", doc, markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
