"""How many keys the resident top-k's bound lists (runtime/kernels/topk_resident.py, step
2-3), on the CPU: the kernel's bound recomputed with torch on N(0, 1) float32 rows at the
indexer's splits, for each chunk program and for the candidate row of its second launch.
And the row-bound top-k's (runtime/kernels/topk_rowbound.py): the keys above its one bound
per row, which its last launch selects among in registers up to ``RowBound.list_keys``
(more: over the row in memory), on N(0, 1) rows and on rows whose last 4,096 keys (a
recent window) score higher by 1 or 3 standard deviations (which path each row takes).

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
from runtime.kernels.topk_tiles import RowBound, TopkSplitPolicy

BOUND_BITS = 5 * BOUND_PASSES.value  # the bound's radix passes, 5 bits each
CUT = ~((1 << (32 - BOUND_BITS)) - 1)  # keeps a key's top BOUND_BITS bits
KEY_NEG_INF = 0x007FFFFF  # the key of -inf
RECENT = 4096  # the recent window's keys (the row's last) in the skewed rows
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
    lo = maxima.sort(descending=True).values[need - 1] & CUT
    return int((keys >= lo).sum())


def row_bound_path(row: torch.Tensor, k: int, chunk: int, sizes: RowBound) -> tuple[int, str]:
    """(keys above the bound, the last launch's path) of the row-bound select on ``row``
    split into chunks of ``chunk``: each chunk's interleaved group maxima over its
    power-of-two tile (-inf's key past its end), the need-th largest cut to its top 15 bits
    (the smallest finite key when fewer maxima are finite), the finite keys above it."""
    n = row.numel()
    chunks = -(-n // chunk)
    tile = 1 << (chunk - 1).bit_length()
    groups = sizes.groups(chunks, chunk, k)
    keys = keys_of(row)
    maxima = torch.cat([torch.cat([part, part.new_full((tile - part.numel(),), KEY_NEG_INF)]).view(-1, groups).amax(0)
                        for part in keys.split(chunk)])
    finite = keys > KEY_NEG_INF
    need = min(k, int(finite.sum()))
    found = maxima[maxima > KEY_NEG_INF].sort(descending=True).values
    bound = int(found[need - 1]) & CUT if found.numel() >= need > 0 else KEY_NEG_INF + 1
    above = int((finite & (keys > bound)).sum())
    if need == 0:
        return above, "nothing finite"
    if above < need:
        return above, "ties at the bound"
    if above <= sizes.first_list_keys(k) < sizes.list_keys(k):
        return above, "first tile"
    return above, "registers" if above <= sizes.list_keys(k) else "over the row"


def candidates(chunks: list[torch.Tensor], k: int) -> torch.Tensor:
    """The second launch's row: each chunk's top-k, ascending ids within the chunk."""
    rows = []
    for chunk in chunks:
        order = torch.sort(chunk, descending=True, stable=True).indices[:k]
        rows.append(chunk[order.sort().values])
    return torch.cat(rows)


def measure(n: int, k: int, rows: int, gen: torch.Generator, bound_gen: torch.Generator) -> dict:
    """Both tables' counts at (n, k): the resident bound's on rows from ``gen``, the row
    bound's on rows from ``bound_gen`` (its own stream: the first table's rows stay those of
    the seed alone)."""
    split = TopkSplitPolicy(resident=True, row_bound=None).split(1, n, k)
    per_chunk, per_row = [], []
    for _ in range(rows):
        row = torch.randn(n, generator=gen)
        chunks = list(row.split(split.chunk))
        per_chunk += [listed(c, min(split.groups, c.numel()), k) for c in chunks]
        per_row.append(listed(candidates(chunks, k), split.groups, k))
    own = TopkSplitPolicy().split(1, n, k)  # the row-bound select's own split (the default policy)
    sizes = own.row_bound or RowBound()
    bounded = {}
    for shift in (0.0, 1.0, 3.0):  # N(0, 1), then the recent window 1 and 3 sigma higher
        counts = []
        for _ in range(rows):
            row = torch.randn(n, generator=bound_gen)
            row[-RECENT:] += shift
            counts.append(row_bound_path(row, k, own.chunk, sizes))
        bounded[shift] = {"above_min": min(c for c, _ in counts), "above_max": max(c for c, _ in counts),
                          "paths": sorted({path for _, path in counts})}
    return {"n": n, "k": k, "split": f"{split.chunks} x {split.chunk} g{split.groups}",
            "list_slots": FusedTopk.resident_list(split.chunk, k),
            "chunk_listed_min": min(per_chunk), "chunk_listed_max": max(per_chunk),
            "candidates_listed_min": min(per_row), "candidates_listed_max": max(per_row),
            "row_bound_split": f"{own.chunks} x {own.chunk}",
            "row_bound_groups": sizes.groups(own.chunks, own.chunk, k), "row_bound_list": sizes.list_keys(k),
            "row_bound_first_list": sizes.first_list_keys(k),
            "row_bound": {f"{shift:g}": v for shift, v in bounded.items()}}


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
    lines += ["", "The row-bound select (the default policy's split and RowBound: one bound per row from "
              "the chunks' group maxima; keys above it, and its last launch's paths), on rows of seed + 1. "
              f"Recent window: the row's last {RECENT} keys shifted up by that many standard deviations.", "",
              "| N | k | split | groups per chunk | first tile / list keys | recent window | keys above the bound "
              "| paths |",
              "|---:|---:|---|---:|---|---:|---|---|"]
    for r in doc["results"]:
        for shift, v in r["row_bound"].items():
            lines.append(f"| {r['n']} | {r['k']} | {r['row_bound_split']} | {r['row_bound_groups']} | "
                         f"{r['row_bound_first_list']} / {r['row_bound_list']} | +{shift} | "
                         f"{v['above_min']}-{v['above_max']} | {', '.join(v['paths'])} |")
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
    gen, bound_gen = torch.Generator().manual_seed(args.seed), torch.Generator().manual_seed(args.seed + 1)
    doc = {"environment": environment(os.getloadavg()[0]),
           "command": command_line("benchmarks/topk_bound.py", argv if argv is not None else sys.argv[1:]),
           "rows": args.rows, "seed": args.seed, "results": [measure(n, k, args.rows, gen, bound_gen) for n, k in SHAPES]}
    write(args.out, "topk_bound_cpu", doc, markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
