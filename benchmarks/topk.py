"""Top-k of indexer scores on one GPU: a dense stable sort vs the torch.topk threshold path
(the reference op, ``runtime.indexer.top_k_entries``: one select for the k-th value, a
cumulative count for the ties, a scatter) vs the Triton radix select
(``runtime.kernels.topk.FusedTopk``), on two score distributions:

- ``randn``: float32 N(0, 1), no ties (the kernel's candidate list is about k long);
- ``relu``: ReLU(N(0, 1) - 2), about 98 % exact zeros; where fewer than k scores are
  positive the k-th value is 0 and every zero is a candidate (the kernel's worst case).

Shapes: the one-pass set (N = 8192 / 65536 / 131072, T = 1 / 8 / 64, k = 512 / 2048) and
the split set (N = 65536 / 131072, T = 1 / 2 / 4 / 8, k = 512 / 1024 / 2048), where a row
is split over programs (runtime/kernels/topk_tiles.py). Triton rows per shape:

- ``one pass <tiling>``: the one-pass kernel (split policy off) for each ``--tilings``;
- ``policy``: ``FusedTopk()`` as the kernel registry builds it (its split, if any; left
  out where the policy does not split: it is then the one-pass row of the default tiling);
  since session 26 the row-bound select (runtime/kernels/topk_rowbound.py) where it splits;
- ``policy chained``: ``FusedTopk`` with ``topk_tiles.CHAINED``, the chained split the
  row-bound one replaced, wherever it splits differently (the comparison in every run);
- ``chunk <L>[:<groups>[:<warps>]]``: a forced chained split into chunks of L keys (split
  shapes only, each ``--chunks`` entry that gives >= 2 chunks and at most N / 2
  candidates, not the chained policy's own; groups and warps from the policy's table row
  for k unless given), to re-set the table from one run;
- with ``--resident``: ``policy resident``, ``FusedTopk`` with the chained policy's
  ``resident=True`` twin where it runs the register-resident select
  (runtime/kernels/topk_resident.py: its splits, and whole rows of up to 16,384 keys),
  ``policy resident one launch``, its split in one launch (a ticket:
  ``TopkSplit.one_launch``), and ``chunk <L> resident``, the resident twin of every forced
  split whose chunk and candidate row fit a program; all in the same run as the chained
  rows, so "vs one pass" and the chained rows beside them are the comparison;
- with ``--row-bound``: ``policy row bound pdl``, the policy's row-bound split with its
  later launches dependent (``dependent_select``), ``policy row bound two tiles`` (or
  ``one tile``), the policy's split with the other candidate tiling of its last launch
  (``RowBound.first_list_per_k`` 2 where the default is 0, else 0), ``policy row bound
  four maxima`` (or ``eight maxima``), the policy's split with the other count of group
  maxima per k (``RowBound.maxima_per_k``, 4 where the default is 8, else 8: launch B's
  three bound passes over half or twice the tile), and
  ``chunk <L> row bound``, the row-bound twin of every forced split whose chunk fits a
  program (unless it is the policy's own split).

Every row first checks that the Triton ids equal the sort's (exactly, ties included).
Times: the median of CUDA-event timings of eager calls (Python and launches included), and
the per-call device time replaying 20 calls from one CUDA graph (timing helpers of
``benchmarks/kernels.py``). Indexer + top-k against the dense reference at 128k keys, with
the registry's top-k, is ``benchmarks/kernels.py --ops indexer+topk``.

    PYTHONPATH=. python benchmarks/topk.py --out benchmarks/results [--shapes split] [--resident] [--row-bound]

Writes topk_<gpu>.json and topk_<gpu>.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from benchmarks.kernels import environment, graph_ms, median_ms
from benchmarks.records import command_line, gpu_tag
from runtime.kernels.reference import REFERENCE_OPS

ONE_PASS_SHAPES = [(n, t, k) for n in (8192, 65536, 131072) for t in (1, 8, 64) for k in (512, 2048)]
SPLIT_SHAPES = [(n, t, k) for n in (65536, 131072) for t in (1, 2, 4, 8) for k in (512, 1024, 2048)]
SHAPE_SETS = {"all": sorted(set(ONE_PASS_SHAPES) | set(SPLIT_SHAPES)), "split": SPLIT_SHAPES}
DISTRIBUTIONS = ("randn", "relu")
DEFAULT_CHUNKS = "4096,8192,16384,32768,8192:1024:4,16384:2048:4"  # lengths, then 4-warp rows


@dataclass
class Row:
    dist: str
    n: int
    t: int
    k: int
    kernel: str  # "one pass <groups:num_warps[:unroll]>", "policy", "chunk <L>[:<groups>[:<warps>]]", + " resident"
    split: str  # "one pass" or "<chunks> x <chunk> g<groups> w<warps>"
    ids_equal: bool
    sort_ms: float
    topk_ms: float
    triton_ms: float
    sort_graph_ms: float | None
    topk_graph_ms: float | None
    triton_graph_ms: float | None
    one_pass_graph_ms: float | None  # the first --tilings one-pass row's, same shape


def sort_entries(scores: torch.Tensor, k: int) -> torch.Tensor:
    """The rule as a full stable sort: the first k of (score desc, index asc) that are
    > -inf, their ids ascending, -1 padded."""
    t, n = scores.shape
    take = min(k, n)
    values, ids = torch.sort(scores, dim=-1, descending=True, stable=True)
    ids = torch.where(values[:, :take] > float("-inf"), ids[:, :take], n).sort(dim=-1).values
    ids = torch.where(ids == n, -1, ids)
    return torch.cat([ids, ids.new_full((t, k - take), -1)], dim=1)


def scores_for(dist: str, t: int, n: int) -> torch.Tensor:
    x = torch.randn(t, n, device="cuda")
    return torch.relu(x - 2.0) if dist == "relu" else x


def times(fn, scores: torch.Tensor, k: int) -> tuple[float, float | None]:
    return median_ms(lambda: fn(scores, k), iters=20), graph_ms(lambda: fn(scores, k))


def describe(split) -> str:
    if split.chunk == 0:
        return "one pass"
    form = (" resident" if split.resident else "") + (" one launch" if split.one_launch else "")
    if split.row_bound is not None:
        return f"{split.chunks} x {split.chunk} w{split.num_warps} row bound"
    return f"{split.chunks} x {split.chunk} g{split.groups} w{split.num_warps}{form}"


def forced_splits(policy, chunks: dict[str, tuple[int, ...]], n: int, t: int, k: int) -> dict:
    """label -> TopkSplit for each ``--chunks`` entry worth timing at (n, t, k): >= 2
    chunks, at most n / 2 candidates, not the policy's own split."""
    from runtime.kernels.topk_tiles import TopkSplit

    row = policy.row_for(k)
    out = {}
    for label, fields in chunks.items():
        defaults = (row.groups, row.num_warps) if row else (4096, 8)
        chunk, groups, warps = (*fields, *defaults[len(fields) - 1:])
        count = -(-n // chunk)
        split = TopkSplit(count, chunk, groups, warps)
        if count >= 2 and split.candidates(k) <= n // 2 and split != policy.split(t, n, k):
            out[f"chunk {label}"] = split
    return out


def variants(kernels: dict, chunks: dict, n: int, t: int, k: int, split_shape: bool) -> list[tuple]:
    """(label, split description, callable) of every Triton row of one shape."""
    rows = [(f"one pass {name}", "one pass", fused) for name, fused in kernels["one pass"].items()]
    policy_kernel, chained = kernels["policy"], kernels["chained"]
    chosen = policy_kernel.policy.split(t, n, k)
    if chosen.chunk:
        rows.append(("policy", describe(chosen), policy_kernel))
    own = chained.policy.split(t, n, k)
    if own.chunk and own != chosen:
        rows.append(("policy chained", describe(own), chained))
    forced = forced_splits(chained.policy, chunks, n, t, k) if split_shape else {}
    for label, split in forced.items():
        rows.append((label, describe(split), lambda x, kk, s=split: chained.run(x, kk, s)))
    resident = kernels.get("resident")
    if resident is not None:
        own = resident.policy.split(t, n, k)
        if own.resident:
            rows.append(("policy resident", describe(own), resident))
            if own.chunks > 1:
                one = replace(own, one_launch=True)
                rows.append(("policy resident one launch", describe(one), lambda x, kk, s=one: resident.run(x, kk, s)))
        for label, split in forced.items():
            twin = replace(split, resident=True)
            if resident.policy.fits(twin.chunk) and resident.policy.fits(twin.candidates(k)):
                rows.append((f"{label} resident", describe(twin), lambda x, kk, s=twin: resident.run(x, kk, s)))
    dependent = kernels.get("row bound pdl")
    if dependent is not None:
        own = dependent.policy.split(t, n, k)
        if own.row_bound is not None:
            rows.append(("policy row bound pdl", describe(own), dependent))
        other = kernels["row bound tiles"]
        own = other.policy.split(t, n, k)
        if own.row_bound is not None:
            tiles = "two tiles" if own.row_bound.first_list_per_k else "one tile"
            rows.append((f"policy row bound {tiles}", describe(own), other))
        maxima = kernels["row bound maxima"]
        own = maxima.policy.split(t, n, k)
        if own.row_bound is not None:
            count = "four" if own.row_bound.maxima_per_k == 4 else "eight"
            rows.append((f"policy row bound {count} maxima", describe(own), maxima))
        bound = policy_kernel.policy.row_bound
        for label, split in forced.items() if bound is not None else ():
            twin = replace(split, row_bound=bound)
            if policy_kernel.policy.fits(twin.chunk) and twin != chosen:
                rows.append((f"{label} row bound", describe(twin), lambda x, kk, s=twin: policy_kernel.run(x, kk, s)))
    return rows


def measure(kernels: dict, chunks: dict, dist: str, n: int, t: int, k: int, split_shape: bool) -> list[Row]:
    """One row per Triton variant; the sort and torch.topk paths are timed once per shape."""
    scores = scores_for(dist, t, n)
    want = sort_entries(scores, k)
    sort_ms, sort_graph = times(sort_entries, scores, k)
    topk_ms, topk_graph = times(REFERENCE_OPS["topk"], scores, k)
    rows: list[Row] = []
    for label, split, fn in variants(kernels, chunks, n, t, k, split_shape):
        equal = torch.equal(fn(scores, k), want)
        triton_ms, triton_graph = times(fn, scores, k)
        base = rows[0].triton_graph_ms if rows else triton_graph
        rows.append(Row(dist, n, t, k, label, split, equal, sort_ms, topk_ms, triton_ms, sort_graph, topk_graph,
                        triton_graph, base))
    return rows


def parse_fields(text: str, sizes: tuple[int, ...]) -> dict[str, tuple[int, ...]] | None:
    """"4096:8,8192:16:4" -> {"4096:8": (4096, 8), "8192:16:4": (8192, 16, 4)}: entries of
    colon-separated integers, as many fields as one of ``sizes``; None when malformed."""
    out = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        fields = part.split(":")
        if len(fields) not in sizes or not all(f.isdigit() for f in fields):
            return None
        out[part] = tuple(int(f) for f in fields)
    return out or None


def valid_split(fields: tuple[int, ...]) -> bool:
    """chunk and groups powers of two >= 32, warps a power of two of 1-32."""
    sizes, warps = fields[:2], fields[2:]
    return (all(f >= 32 and not f & (f - 1) for f in sizes)
            and all(1 <= w <= 32 and not w & (w - 1) for w in warps))


def fmt(ms: float | None) -> str:
    return "n/a" if ms is None else f"{ms:.4f}"


def ratio(num: float | None, den: float | None) -> str:
    return f"{num / den:.1f}x" if num is not None and den else "n/a"


def markdown(env: dict, rows: list[Row], command: str) -> str:
    lines = [
        "# Top-k benchmark: dense sort vs torch.topk path vs Triton radix select (one pass and split)", "",
        f"- GPU: {env['gpu']} ({env['nvidia_smi']}); torch {env['torch']}, triton {env['triton']}, "
        f"CUDA {env['cuda']}",
        f"- Command: `{command}`",
        "- eager = median of 20 CUDA-event timings of one call (Python + launches); graph = per-call "
        "device time replaying 20 calls from one CUDA graph. ids equal = Triton ids == the sort's. "
        "policy = FusedTopk() as the kernel registry builds it (rows where it splits); chunk L = a forced "
        "split into chunks of L keys; \"resident\": the register-resident select "
        "(runtime/kernels/topk_resident.py); vs one pass = the first one-pass row's graph time / this row's.", "",
        "| scores | N | T | k | kernel | split | ids equal | sort eager ms | torch.topk eager ms | Triton eager ms "
        "| sort graph ms | torch.topk graph ms | Triton graph ms | vs torch.topk (graph) | vs one pass (graph) |",
        "|---|---:|---:|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r.dist} | {r.n} | {r.t} | {r.k} | {r.kernel} | {r.split} | "
                     f"{'yes' if r.ids_equal else '**NO**'} | {r.sort_ms:.4f} | {r.topk_ms:.4f} | {r.triton_ms:.4f} | "
                     f"{fmt(r.sort_graph_ms)} | {fmt(r.topk_graph_ms)} | {fmt(r.triton_graph_ms)} | "
                     f"{ratio(r.topk_graph_ms, r.triton_graph_ms)} | {ratio(r.one_pass_graph_ms, r.triton_graph_ms)} |")
    return "\n".join(lines) + "\n"


def build_kernels(tilings: dict[str, tuple[int, ...]], resident: bool = False, row_bound: bool = False) -> dict:
    """{"one pass": {tiling label: FusedTopk with splitting off}, "policy": FusedTopk(),
    "chained": FusedTopk with ``topk_tiles.CHAINED``}, "resident": FusedTopk with the chained
    policy's resident twin when asked, and "row bound pdl": the policy with dependent
    launches when asked; ValueError from a bad tiling."""
    from runtime.kernels.topk import FusedTopk, TopkTiling
    from runtime.kernels.topk_tiles import CHAINED, RowBound, TopkSplitPolicy

    names = ("groups", "num_warps", "unroll")
    one_pass = {name: FusedTopk(TopkTiling(**dict(zip(names[: len(fields)], fields, strict=True))),
                                TopkSplitPolicy(programs=0))
                for name, fields in tilings.items()}
    kernels = {"one pass": one_pass, "policy": FusedTopk(), "chained": FusedTopk(policy=CHAINED)}
    if resident:
        kernels["resident"] = FusedTopk(policy=replace(CHAINED, resident=True))
    if row_bound:
        kernels["row bound pdl"] = FusedTopk(policy=TopkSplitPolicy(dependent_select=True))
        default = TopkSplitPolicy().row_bound or RowBound()
        tiles = replace(default, first_list_per_k=0 if default.first_list_per_k else 2)
        kernels["row bound tiles"] = FusedTopk(policy=TopkSplitPolicy(row_bound=tiles))
        maxima = replace(default, maxima_per_k=8 if default.maxima_per_k == 4 else 4)
        kernels["row bound maxima"] = FusedTopk(policy=TopkSplitPolicy(row_bound=maxima))
    return kernels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--dist", nargs="+", choices=DISTRIBUTIONS, default=list(DISTRIBUTIONS),
                        help="score distributions to run")
    parser.add_argument("--shapes", choices=sorted(SHAPE_SETS), default="all",
                        help="all: the one-pass and the split shapes; split: T = 1-8 at 64k/128k keys only")
    parser.add_argument("--tilings", default="4096:8",
                        help="comma-separated one-pass tilings to time, groups:num_warps[:unroll] (TopkTiling)")
    parser.add_argument("--chunks", default=DEFAULT_CHUNKS,
                        help="comma-separated forced splits to time at the split shapes, chunk[:groups[:warps]] "
                             "(powers of two; empty: none)")
    parser.add_argument("--resident", action="store_true",
                        help="also time the register-resident select (the chained policy with resident=True, "
                             "and the resident twin of every forced split that fits)")
    parser.add_argument("--row-bound", action="store_true",
                        help="also time the policy's row-bound select with dependent launches, and the "
                             "row-bound twin of every forced split that fits")
    args = parser.parse_args(argv)
    tilings = parse_fields(args.tilings, (2, 3))
    if tilings is None:
        print(f"benchmarks/topk.py: --tilings: expected groups:num_warps[:unroll][,...] e.g. 4096:8,8192:16:4, "
              f"got {args.tilings!r}", file=sys.stderr)
        return 2
    chunks = parse_fields(args.chunks, (1, 2, 3)) if args.chunks.strip() else {}
    if chunks is None or not all(valid_split(fields) for fields in chunks.values()):
        print(f"benchmarks/topk.py: --chunks: expected chunk[:groups[:warps]][,...], chunk and groups powers of "
              f"two >= 32, warps 1-32, e.g. 8192,16384:2048:4, got {args.chunks!r}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("benchmarks/topk.py: needs a CUDA GPU", file=sys.stderr)
        return 2
    try:
        kernels = build_kernels(tilings, args.resident, args.row_bound)
    except ValueError as exc:
        print(f"benchmarks/topk.py: --tilings: {exc}", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    env = environment()
    command = command_line("benchmarks/topk.py", argv or sys.argv[1:])
    stem = f"topk_{gpu_tag(env['gpu'])}"
    rows = []
    split_shapes = set(SPLIT_SHAPES)
    for dist in args.dist:
        for n, t, k in SHAPE_SETS[args.shapes]:
            for row in measure(kernels, chunks, dist, n, t, k, (n, t, k) in split_shapes):
                rows.append(row)
                print(f"{dist:5s} N={n:6d} T={t:2d} k={k:4d} {row.kernel:16s} {row.split:18s} "
                      f"equal={row.ids_equal!s:5s} eager sort {row.sort_ms:.4f} topk {row.topk_ms:.4f} "
                      f"triton {row.triton_ms:.4f} | graph sort {fmt(row.sort_graph_ms)} "
                      f"topk {fmt(row.topk_graph_ms)} triton {fmt(row.triton_graph_ms)}", flush=True)
            save(args.out, stem, env, command, rows)  # after every shape: a run cut short keeps what it timed
    print(markdown(env, rows, command))  # the files hold it already (the last shape's save)
    return 0 if all(r.ids_equal for r in rows) else 1


def save(out: Path, stem: str, env: dict, command: str, rows: list[Row]) -> None:
    """The JSON and the note of the rows timed so far, written quietly."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps({"environment": env, "command": command,
                                                  "rows": [asdict(r) for r in rows]}, indent=2) + "\n")
    (out / f"{stem}.md").write_text(markdown(env, rows, command))


if __name__ == "__main__":
    raise SystemExit(main())
