"""How many keys the resident top-k's bound lists (runtime/kernels/topk_resident.py, step
2-3), on the CPU: the kernel's bound recomputed with torch on N(0, 1) float32 rows at the
indexer's splits, for each chunk program and for the candidate row of its second launch.

Why: a resident program's candidate list has ``FusedTopk.resident_list(keys, k)`` slots
(2k); a chunk whose list would be longer runs its radix passes over every key instead
(slower, still exact). This says how far under 2k the lists stay on tie-free scores. The
bound: keys as order-preserving uint32, the ``groups`` interleaved groups' maxima, the
need-th largest maximum cut to its top 15 bits (``BOUND_PASSES`` x 5: the kernel's passes
may stop earlier, which only lowers the bound further in the rare case the need-th
maximum's bin is wholly taken), and the finite keys at least that large.

    PYTHONPATH=. python benchmarks/topk_bound.py --out benchmarks/results [--rows 5]

Writes topk_bound_cpu.json and .md.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

from benchmarks.records import command_line, environment, header, write
from runtime.kernels.topk import FusedTopk
from runtime.kernels.topk_resident import BOUND_PASSES
from runtime.kernels.topk_tiles import TopkSplitPolicy

BOUND_BITS = 5 * BOUND_PASSES.value  # the bound's radix passes, 5 bits each
SHAPES = ((131072, 512), (131072, 1024), (131072, 2048), (65536, 512))  # (N, k) of the split shapes at one row


def keys_of(scores: torch.Tensor) -> torch.Tensor:
    """float32 -> order-preserving uint32 keys (as int64, so comparisons are unsigned)."""
    bits = (scores + 0.0).view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    return torch.where(bits >> 31 != 0, bits ^ 0xFFFFFFFF, bits | 0x80000000)


def listed(chunk: torch.Tensor, groups: int, k: int) -> int:
    """Keys of one program the bound lists (every key finite here, so need = min(k, keys))."""
    keys = keys_of(chunk)
    n = keys.numel()
    padded = torch.cat([keys, keys.new_zeros(-n % groups)])  # out-of-range keys lose every max
    maxima = padded.view(-1, groups).amax(0)
    need = min(k, n)
    if need > maxima.numel():  # fewer groups than keys needed: no bound, every key listed (as the kernel)
        return n
    lo = maxima.sort(descending=True).values[need - 1] & ~((1 << (32 - BOUND_BITS)) - 1)
    return int((keys >= lo).sum())


def candidates(chunks: list[torch.Tensor], k: int) -> torch.Tensor:
    """The second launch's row: each chunk's top-k, ascending ids within the chunk."""
    rows = []
    for chunk in chunks:
        order = torch.sort(chunk, descending=True, stable=True).indices[:k]
        rows.append(chunk[order.sort().values])
    return torch.cat(rows)


def measure(n: int, k: int, rows: int, gen: torch.Generator) -> dict:
    split = TopkSplitPolicy(resident=True).split(1, n, k)
    per_chunk, per_row = [], []
    for _ in range(rows):
        row = torch.randn(n, generator=gen)
        chunks = list(row.split(split.chunk))
        per_chunk += [listed(c, min(split.groups, c.numel()), k) for c in chunks]
        per_row.append(listed(candidates(chunks, k), split.groups, k))
    return {"n": n, "k": k, "split": f"{split.chunks} x {split.chunk} g{split.groups}",
            "list_slots": FusedTopk.resident_list(split.chunk, k),
            "chunk_listed_min": min(per_chunk), "chunk_listed_max": max(per_chunk),
            "candidates_listed_min": min(per_row), "candidates_listed_max": max(per_row)}


def markdown(doc: dict) -> str:
    lines = header("Top-k: keys the resident select's bound lists (CPU recompute)", doc) + [
        f"N(0, 1) float32 rows, {doc['rows']} per shape, seed {doc['seed']}; the bound as "
        "runtime/kernels/topk_resident.py computes it (15 bits of the need-th largest group maximum).", "",
        "| N | k | split | list slots | keys listed per chunk | keys listed per candidate row |",
        "|---:|---:|---|---:|---|---|"]
    for r in doc["results"]:
        lines.append(f"| {r['n']} | {r['k']} | {r['split']} | {r['list_slots']} | "
                     f"{r['chunk_listed_min']}-{r['chunk_listed_max']} | "
                     f"{r['candidates_listed_min']}-{r['candidates_listed_max']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--rows", type=int, default=5, help="rows per shape (default 5)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.rows < 1:
        print(f"benchmarks/topk_bound.py: --rows: expected >= 1, got {args.rows}", file=sys.stderr)
        return 2
    gen = torch.Generator().manual_seed(args.seed)
    doc = {"environment": environment(os.getloadavg()[0]),
           "command": command_line("benchmarks/topk_bound.py", argv if argv is not None else sys.argv[1:]),
           "rows": args.rows, "seed": args.seed, "results": [measure(n, k, args.rows, gen) for n, k in SHAPES]}
    write(args.out, "topk_bound_cpu", doc, markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
