"""GPU sweep of the fused attention's tiling (runtime/kernels/attention_tiles.py).

For ``mid`` and ``flash`` decode shapes (H=16/64, hd=512, W=128, top-k 512) at T = 1, 8
and 64 queries, in the cache layouts of the kernel (``engine``: one request's window by
position and its global entries; ``ring``: the static slab's per-slot ring and global KV,
one query per slot; ``ring_packed``, asked for with --layouts: that ring and global KV as
packed FP8 / NVFP4 bytes decoded in the kernel, ``kv_storage = "packed"``, its bytes and
roofline counted in the packed sizes), every candidate tiling is timed as CUDA-graph replay device time
(20 calls per graph, the candidates of a case replayed in turn for 9 rounds, medians;
benchmarks/kernels.py's ``interleaved_graph_ms``; before session 43 each was read alone,
10 replays) and
checked against the reference (max |fused - reference| <= 2e-2 of max |reference|, the
bf16 parity tolerance of tests/runtime/test_kernels_parity_attention.py). An empty Triton kernel is
timed the same way, in the same run: the issue-16 goal for an op moving < 4 MiB is a
device time within 2x of it, and >= 60 % of the 4.3 TB/s roofline for >= 4 MiB
(benchmarks/kernels.py's limits and empty kernel). In the ring
layout the batched torch core the kernel replaces in the static step is timed too.

Candidates are the product of --block-h, --block-n, --warps, --stages, --splits, --merge-d,
--value-d, --programs, --prefetch-ids, --ids-ahead, --group-decode, --split-sources,
--decode-once, --merge-tail and --merge-warps (tilings that run the same program, e.g. a head cap above
the head count, are timed once). ``--twins FLAG...`` times instead each case's table row beside its
twin with each switch on (the deciding run of a flip); ``--merge-warps-twins N...`` its twins with
the merge launch on N warps. The tables printed last name, per T
bucket and per table of runtime/kernels/attention_tiles.py (TILES, WIDE_TILES, PACKED_TILES,
PACKED_WIDE_TILES: the one whose row runs the case), the candidate with the best geometric
mean over that table's cases of (its time / the case's best time), as a row to paste in.

    PYTHONPATH=. python benchmarks/attention_tiles.py --out benchmarks/results
    PYTHONPATH=. python benchmarks/attention_tiles.py --quick --out "$OUT"
    PYTHONPATH=. python benchmarks/attention_tiles.py --quick --layouts ring ring_packed --out "$OUT"

Writes attention_tiles_<gpu>.json and attention_tiles_<gpu>.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from benchmarks.kernels import (
    HBM_BYTES_PER_S,
    LARGE_OP_BYTES,
    LAUNCH_GOAL,
    ROOFLINE_GOAL,
    attention_bytes,
    empty_launch_ms,
    environment,
    interleaved_graph_ms,
)
from benchmarks.records import command_line, gpu_tag
from runtime.config import V41Config
from runtime.kernels.attention_tiles import TABLES, AttentionTile, t_bucket, table_name, tile_for

CONTEXT = 1024  # ring layout: positions ~ the context, the global KV of a 1024-position slot
LAYOUTS = ("engine", "ring", "ring_packed")


@dataclass
class Shape:
    scale: str
    t: int
    layout: str
    heads: int
    head_dim: int
    window: int
    topk: int

    @property
    def bytes(self) -> float:
        """benchmarks/kernels.py's attention count (``attention_bytes``: keys read once per
        query, in the layout's storage)."""
        return attention_bytes(self.t, self.heads, self.head_dim, self.window, self.topk,
                               packed=self.layout == "ring_packed")

    @property
    def label(self) -> str:
        return f"{self.scale} T={self.t} {self.layout}"


@dataclass
class Timing:
    tile: str
    ms: float | None
    max_rel_err: float | None = None
    error: str = ""


@dataclass
class CaseResult:
    shape: Shape
    table_tile: str
    timings: list[Timing] = field(default_factory=list)
    core_ms: float | None = None  # ring layout: the batched torch core it replaces (float32 gathers + bmm)

    def best(self) -> Timing | None:
        ok = [x for x in self.timings if x.ms is not None and not x.error]
        return min(ok, key=lambda x: x.ms) if ok else None

    def ms_of(self, label: str) -> float | None:
        for x in self.timings:
            if x.tile == label and not x.error:
                return x.ms  # None when the graph could not be captured
        return None


def inputs(shape: Shape, gen: torch.Generator, device: str = "cuda", dtype: torch.dtype = torch.bfloat16):
    """(fused call, reference call) on random caches of ``shape`` (bf16 on the GPU; the
    CPU smoke test passes float32, which the interpreter can compute)."""
    from runtime.attention import sparse_attention
    from runtime.numerics import Numerics
    from runtime.static.attention import KeyLayout, decode_attention

    def r(*dims, dtype=dtype):
        return torch.randn(*dims, generator=gen).to(device, dtype)

    t, h, hd, w, k = shape.t, shape.heads, shape.head_dim, shape.window, shape.topk
    q, sink = r(t, h, hd), r(h, dtype=torch.float32)
    num = Numerics()
    if shape.layout == "engine":
        ctx = 8192
        pos = torch.randint(w, ctx, (t,), generator=gen).to(device)
        floor = torch.zeros(t, dtype=torch.int64, device=device)
        swa, comp = r(ctx, hd), r(ctx // 2, hd)
        topk = torch.randint(0, ctx // 2, (t, k), generator=gen).sort(1).values.to(device)

        def fused(op):
            return op(q, pos, floor, swa, w, comp, topk, sink, num)

        def reference():
            return sparse_attention(q, pos, floor, swa, w, comp, topk, sink, num)
        return fused, reference
    pos = torch.randint(CONTEXT - 64, CONTEXT, (t,), generator=gen).to(device)
    floor = torch.zeros(t, dtype=torch.int64, device=device)
    ring, entries = r(t, w, hd), r(t, CONTEXT // 2, hd)
    topk = torch.randint(0, CONTEXT // 2, (t, k), generator=gen).sort(1).values.to(device)
    layout = KeyLayout.for_window(pos, floor, w, hd).with_topk(topk)
    keys = ring, entries
    if shape.layout == "ring_packed":  # the kernel reads the bytes, the reference their values
        from runtime.kv_packing import pack

        keys = pack(ring, "fp8"), pack(entries, "nvfp4")
        ring, entries = keys[0].unpack(dtype), keys[1].unpack(dtype)

    def fused(op):
        return op.ring(q, pos, floor, *keys, topk, sink)

    def reference():
        return decode_attention(q, ring, entries, layout, sink, num)
    return fused, reference


def effective(tile: AttentionTile, shape: Shape) -> tuple:
    """What the kernel would run: tilings with the same key launch the same program."""
    from runtime.kernels.attention import split_plan

    _, n_split = split_plan(shape.window + shape.topk, tile.splits_for(shape.t, shape.heads), tile.block_n)
    merge = tile.merge_columns(shape.head_dim) if n_split > 1 else 0  # no merge without splits
    value = tile.value_columns(shape.head_dim, packed=shape.layout == "ring_packed")
    return (tile.heads_per_program(shape.heads), tile.block_n, tile.num_warps, tile.num_stages, n_split, merge,
            value, tile.prefetch_ids, tile.ids_ahead, tile.group_decode and shape.layout == "ring_packed",
            tile.split_sources, tile.decode_once and shape.layout == "ring_packed", tile.float32_block_n,
            tile.merge_tail and n_split > 1, tile.merge_warps if merge and not tile.merge_tail else 0)


def sweep_case(shape: Shape, candidates: list[AttentionTile], gen: torch.Generator, base,
               timer=interleaved_graph_ms, twins: tuple[str, ...] = (), merge_warps_twins: tuple[int, ...] = (),
               **where) -> CaseResult:
    """``base``: a FusedSparseAttention whose kernels every candidate shares
    (``with_tile``); ``timer``: fns -> ms per call of each (benchmarks/kernels.py's graph
    replays, the candidates' graphs in turn, so a drift of the machine reaches all of them
    alike; the CPU smoke test passes a stand-in); ``twins``: AttentionTile switches, each
    timed as the case's table row with it on, after the candidates; ``merge_warps_twins``: the
    table row with its merge launch on each of these warp counts, after those; ``where``:
    ``inputs``' device and dtype (default: bf16 on the GPU)."""
    fused, reference = inputs(shape, gen, **where)
    want = reference().float()
    scale = max(1.0, float(want.abs().max()))
    table = tile_for(shape.t, shape.head_dim, packed=shape.layout == "ring_packed", heads=shape.heads)
    result = CaseResult(shape, table.label())
    if shape.layout != "engine":  # the engine's reference reads positions on the host: no graph
        result.core_ms = timer([reference])[0]
    entries: list[tuple[str, tuple]] = []  # (label, program): tilings running one program share its timing
    failed: dict[tuple, Timing] = {}
    ready: dict[tuple, tuple[str, object, float]] = {}  # program -> (label, call, max rel err)
    for tile in [table, *candidates, *(replace(table, **{flag: True}, **TWIN_NEEDS.get(flag, {})) for flag in twins),
                 *(replace(table, merge_warps=w) for w in merge_warps_twins)]:
        key = effective(tile, shape)
        if tile.label() in {label for label, _ in entries}:
            continue
        entries.append((tile.label(), key))
        if key in failed or key in ready:
            continue
        op = base.with_tile(tile)
        try:
            err = float((fused(op).float() - want).abs().max()) / scale
        except Exception as exc:  # noqa: BLE001 - a tiling that does not compile (resources) is a result
            failed[key] = Timing(tile.label(), None, None, f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:120]}")
        else:
            ready[key] = (tile.label(), lambda op=op: fused(op), err)
    times = dict(zip(ready, timer([call for _, call, _ in ready.values()]), strict=True)) if ready else {}
    for label, key in entries:
        if key in failed:
            result.timings.append(replace(failed[key], tile=label))
            continue
        _, _, err = ready[key]
        ms = times[key]
        problem = "no CUDA graph" if ms is None else ""
        result.timings.append(Timing(label, ms, err, f"wrong: max rel err {err:.3g}" if err > 2e-2 else problem))
    return result


SWITCH_LABELS = {"pf": "prefetch_ids", "ia": "ids_ahead", "gd": "group_decode", "ss": "split_sources",
                 "do": "decode_once", "mt": "merge_tail"}  # AttentionTile's on / off switches, by their label in AttentionTile.label()
TWIN_FLAGS = tuple(SWITCH_LABELS.values())
TWIN_NEEDS = {"group_decode": {"decode_once": True}, "merge_tail": {"merge_d": 0}}  # a switch's twin with the switches it needs (AttentionTile)


def candidates_from(args) -> list[AttentionTile]:
    """The product of the tiling and switch options, less the group decode without decode
    once where decode once is in the product too, and the merge tail with merge columns
    (AttentionTile refuses both pairs; asked for alone, its error names them)."""
    return [AttentionTile(h, n, w, s, x, m, v, p, bool(f), bool(a), bool(g), bool(ss), bool(do), merge_tail=bool(mt),
                          merge_warps=mw)
            for h, n, w, s, x, m, v, p, f, a, g, ss, do, mt, mw in
            itertools.product(args.block_h, args.block_n, args.warps, args.stages, args.splits, args.merge_d,
                              args.value_d, args.programs, args.prefetch_ids, args.ids_ahead, args.group_decode,
                              args.split_sources, args.decode_once, args.merge_tail, args.merge_warps)
            if not (g and not do and 1 in args.decode_once) and not (mt and m and 0 in args.merge_d)]


def suggestions(results: list[CaseResult]) -> dict[tuple[int, str], tuple[str, float]]:
    """(T bucket, table name) -> (tile label, geometric mean of time / best time over its
    cases): each case counts toward the table whose row runs it
    (runtime/kernels/attention_tiles.py's ``table_name``: packed caches PACKED_TILES /
    PACKED_WIDE_TILES, loaded ones TILES / WIDE_TILES, the wide tables at 64 heads or more
    where they have the bucket's row), so a row is suggested only from the calls it serves."""
    def key_of(r: CaseResult) -> tuple[int, str]:
        shape = r.shape
        return t_bucket(shape.t), table_name(shape.t, shape.head_dim, shape.layout == "ring_packed", shape.heads)

    out = {}
    for key in sorted({key_of(r) for r in results}):
        cases = [r for r in results if key_of(r) == key and r.best() is not None]
        labels = {x.tile for r in cases for x in r.timings}
        scored = []
        for label in labels:
            times = [r.ms_of(label) for r in cases]
            if all(x is not None for x in times):  # a tiling that failed anywhere is no row
                ratios = [x / r.best().ms for x, r in zip(times, cases, strict=True)]
                scored.append((math.exp(sum(math.log(x) for x in ratios) / len(ratios)), label))
        if scored:
            score, label = min(scored)
            out[key] = (label, score)
    return out


# AttentionTile's numeric fields after the first five, by label prefix: those the row lists
# before its switches, and after them
LABEL_NUMBERS = (("m", "merge_d"), ("v", "value_d"), ("p", "programs"))
LABEL_NUMBERS_LAST = (("f32n", "float32_block_n"), ("mw", "merge_warps"))


def label_numbers(parts: list[str], prefixes: tuple[tuple[str, str], ...]) -> str:
    """", name=value" for each label part that is one of ``prefixes`` followed by digits."""
    return "".join(f", {name}={part[len(prefix):]}" for part in parts for prefix, name in prefixes
                   if part.startswith(prefix) and part[len(prefix):].isdigit())


def as_row(bucket: int, head_dim_bucket: int, label: str) -> str:
    parts = label.split()
    h, n, w, s, x = (int(part[1:]) for part in parts[:5])
    extra = label_numbers(parts[5:], LABEL_NUMBERS)
    extra += "".join(f", {name}=True" for flag, name in SWITCH_LABELS.items() if flag in parts[5:])
    extra += label_numbers(parts[5:], LABEL_NUMBERS_LAST)
    return (f"({bucket}, {head_dim_bucket}): AttentionTile({h}, {n}, num_warps={w}, num_stages={s}, "
            f"splits={x}{extra}),")


def verdict(shape: Shape, ms: float, empty_ms: float) -> tuple[float, str]:
    """(roofline fraction, issue 16's goal met or not), with benchmarks/kernels.py's limits."""
    fraction = shape.bytes / HBM_BYTES_PER_S / (ms * 1e-3)
    if shape.bytes < LARGE_OP_BYTES:
        return fraction, ("met" if ms <= LAUNCH_GOAL * empty_ms else "not met") + f" ({ms / empty_ms:.1f}x empty)"
    return fraction, ("met" if fraction >= ROOFLINE_GOAL else "not met") + f" ({fraction:.0%} of roofline)"


def markdown(doc: dict, results: list[CaseResult], empty_ms: float, best_rows: dict) -> str:
    env = doc["environment"]
    lines = [
        "# Fused attention tiling sweep", "",
        f"- GPU: {env['gpu']} ({env['nvidia_smi']}); torch {env['torch']}, triton {env['triton']}, CUDA {env['cuda']}",
        f"- Command: `{doc['command']}`",
        "- Device time per call: one CUDA graph of 20 calls per tiling, the tilings of a case replayed in turn for "
        "9 rounds, medians (benchmarks/kernels.py `interleaved_graph_ms`). Roofline: bytes / 4.3 TB/s. Goal (issue 16): < 4 MiB moved: <= 2x the empty kernel; "
        f">= 4 MiB: >= 60 % of the roofline. Empty Triton kernel (`empty_launch_ms`): **{empty_ms * 1e3:.2f} us**.",
        "- Tile label: h = heads per program (cap), n = keys per tile, w = warps, s = stages, x = splits asked, "
        "m = head-dim columns per merge program, v = value columns per partial program (absent: all), "
        "p = programs to fill (x is then a cap), pf = top-k ids prefetched into L1 before the loop, ia = "
        "each tile's ids loaded one iteration ahead.", "",
        "- `core us`: the ring layout's batched torch core (runtime/static/attention.py, float32 gathers "
        "+ bmm), the static step's attention before the fused ring kernel.", "",
        "| case | bytes | core us | table tile | table us | best tile | best us | roofline (best) | goal (best) |",
        "|---|---:|---:|---|---:|---|---:|---:|---|",
    ]
    for r in results:
        best, table_ms = r.best(), r.ms_of(r.table_tile)
        core = f"{r.core_ms * 1e3:.1f}" if r.core_ms is not None else "-"
        head = f"| {r.shape.label} | {r.shape.bytes / 1e6:.2f} MB | {core} | {r.table_tile} |"
        if best is None:
            lines.append(f"{head} - | none ran | - | - | - |")
            continue
        fraction, goal = verdict(r.shape, best.ms, empty_ms)
        table_us = f"{table_ms * 1e3:.1f}" if table_ms is not None else "-"
        lines.append(f"{head} {table_us} | {best.tile} | {best.ms * 1e3:.1f} | {fraction:.0%} | {goal} |")
    for table in TABLES:
        rows = [f"{as_row(b, 512, label)}  # {score:.2f}x of each case's best"
                for (b, name), (label, score) in best_rows.items() if name == table]
        if rows:
            lines += ["", f"Suggested rows of runtime/kernels/attention_tiles.py `{table}` (best geometric mean of "
                      "time / the case's best over the bucket's cases):", "", "```python", *rows, "```"]
    lines += ["", "All candidates (us; `-` = did not run):", ""]
    for r in results:
        runs = sorted((x for x in r.timings if x.ms is not None and not x.error), key=lambda x: x.ms)
        failed = [x for x in r.timings if x.ms is None or x.error]
        lines.append(f"- {r.shape.label}: " + ", ".join(f"{x.tile} {x.ms * 1e3:.1f}" for x in runs)
                     + ("; failed: " + ", ".join(f"{x.tile} ({x.error or 'no CUDA graph'})" for x in failed)
                        if failed else ""))
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--quick", action="store_true", help="a small candidate set (block-n 16 32, warps 4 8, "
                        "stages 3, splits 4 16), for a first look")
    parser.add_argument("--scales", nargs="+", default=["mid", "flash"], choices=["mid", "flash"])
    parser.add_argument("--t", nargs="+", type=int, default=[1, 8, 64], help="query counts")
    parser.add_argument("--layouts", nargs="+", default=["engine", "ring"], choices=LAYOUTS)
    parser.add_argument("--block-h", nargs="+", type=int, default=[16, 32])
    parser.add_argument("--block-n", nargs="+", type=int, default=[16, 32, 64])
    parser.add_argument("--warps", nargs="+", type=int, default=[4, 8])
    parser.add_argument("--stages", nargs="+", type=int, default=[2, 3])
    parser.add_argument("--splits", nargs="+", type=int, default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--merge-d", nargs="+", type=int, default=[0],
                        help="head-dim columns per merge program (0: the whole head dim)")
    parser.add_argument("--value-d", nargs="+", type=int, default=[0],
                        help="value columns per partial program (0: the whole head dim)")
    parser.add_argument("--programs", nargs="+", type=int, default=[0],
                        help="programs to fill (0: splits as given; more: splits is a cap, the fewest that fill)")
    parser.add_argument("--prefetch-ids", nargs="+", type=int, default=[0], choices=[0, 1],
                        help="1: the candidates' twins with AttentionTile.prefetch_ids (top-k ids into L1 first)")
    parser.add_argument("--ids-ahead", nargs="+", type=int, default=[0], choices=[0, 1],
                        help="1: the candidates' twins with AttentionTile.ids_ahead (each tile's ids one iteration ahead)")
    parser.add_argument("--group-decode", nargs="+", type=int, default=[0], choices=[0, 1],
                        help="1: the candidates' twins with AttentionTile.group_decode (packed caches: scales per "
                             "group; needs --decode-once 1)")
    parser.add_argument("--twins", nargs="+", default=[], choices=TWIN_FLAGS,
                        help="time each case's table row and its twin with each of these switches on, and no "
                             "other candidate (a flip's deciding run)")
    parser.add_argument("--split-sources", nargs="+", type=int, default=[0], choices=[0, 1],
                        help="1: the candidates' twins with AttentionTile.split_sources (window and top-k slots in "
                             "two loops)")
    parser.add_argument("--merge-warps", nargs="+", type=int, default=[4],
                        help="warps of the candidates' merge programs (AttentionTile.merge_warps)")
    parser.add_argument("--merge-warps-twins", nargs="+", type=int, default=[],
                        help="time each case's table row beside its twins with the merge launch on these warp "
                             "counts, and no other candidate unless asked (--twins)")
    parser.add_argument("--merge-tail", nargs="+", type=int, default=[0], choices=[0, 1],
                        help="1: the candidates' twins with AttentionTile.merge_tail (the last partial program of "
                             "each query's head block merges; no merge launch; with --merge-d 0)")
    parser.add_argument("--decode-once", nargs="+", type=int, default=[0], choices=[0, 1],
                        help="1: the candidates' twins with AttentionTile.decode_once (packed caches: the decoded tile "
                             "computed once for both products)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.quick:
        args.block_h, args.block_n, args.warps, args.stages, args.splits = [16, 32], [16, 32], [4, 8], [3], [4, 16]
    if any(t < 1 for t in args.t):
        print(f"benchmarks/attention_tiles.py: --t expects positive query counts, got {args.t}", file=sys.stderr)
        return 2
    try:
        candidates = [] if args.twins or args.merge_warps_twins else candidates_from(args)
        for warps in args.merge_warps_twins:
            AttentionTile(16, 16, merge_warps=warps)  # refused here, before any GPU work, if not a warp count
    except ValueError as exc:
        print(f"benchmarks/attention_tiles.py: {exc} (from the tiling and switch options)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("benchmarks/attention_tiles.py: needs a CUDA GPU", file=sys.stderr)
        return 2
    from runtime.kernels.attention import FusedSparseAttention

    gen, base = torch.Generator().manual_seed(0), FusedSparseAttention()
    empty_ms = empty_launch_ms()
    print(f"empty Triton kernel: {empty_ms * 1e3:.2f} us per call (graph replay)", flush=True)
    results = []
    for scale in args.scales:
        c = V41Config.preset(scale)
        for t in args.t:
            for layout in args.layouts:
                shape = Shape(scale, t, layout, c.num_attention_heads, c.head_dim, c.sliding_window, c.index_topk)
                result = sweep_case(shape, candidates, gen, base, twins=tuple(args.twins),
                                    merge_warps_twins=tuple(args.merge_warps_twins))
                best = result.best()
                print(f"{shape.label:24s} {shape.bytes / 1e6:6.2f} MB  table {result.table_tile} "
                      f"{(result.ms_of(result.table_tile) or float('nan')) * 1e3:7.1f} us  best "
                      f"{best.tile if best else '-'} {(best.ms if best else float('nan')) * 1e3:7.1f} us", flush=True)
                results.append(result)
    env = environment()
    best_rows = suggestions(results)
    command = command_line("benchmarks/attention_tiles.py", argv or sys.argv[1:])
    doc = {"environment": env, "command": command, "hbm_bytes_per_s": HBM_BYTES_PER_S,
           "empty_kernel_ms": empty_ms,
           "suggested_rows": {f"{table} {b}": {"tile": label, "geomean_vs_best": score}
                              for (b, table), (label, score) in best_rows.items()},
           "cases": [{"shape": asdict(r.shape), "bytes": r.shape.bytes, "table_tile": r.table_tile, "core_ms": r.core_ms,
                      "timings": [asdict(x) for x in r.timings]} for r in results]}
    tag = gpu_tag(env["gpu"])
    args.out.mkdir(parents=True, exist_ok=True)
    note = markdown(doc, results, empty_ms, best_rows)
    (args.out / f"attention_tiles_{tag}.json").write_text(json.dumps(doc, indent=2) + "\n")
    (args.out / f"attention_tiles_{tag}.md").write_text(note)
    print(note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
