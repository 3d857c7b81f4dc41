"""Top-k of indexer scores on one GPU: a dense stable sort vs the torch.topk threshold path
(the reference op, ``runtime.indexer.top_k_entries``: one select for the k-th value, a
cumulative count for the ties, a scatter) vs the Triton radix select
(``runtime.kernels.topk.FusedTopk``), at N = 8192 / 65536 / 131072, T = 1 / 8 / 64,
k = 512 / 2048, on two score distributions:

- ``randn``: float32 N(0, 1), no ties (the kernel's candidate list is about k long);
- ``relu``: ReLU(N(0, 1) - 2), about 98 % exact zeros; where fewer than k scores are
  positive the k-th value is 0 and every zero is a candidate (the kernel's worst case).

Every case first checks that the Triton ids equal the sort's (exactly, ties included).
Times: the median of CUDA-event timings of eager calls (Python and launches included), and
the per-call device time replaying 20 calls from one CUDA graph (timing helpers of
``benchmarks/kernels.py``).

    PYTHONPATH=. python benchmarks/topk.py --out benchmarks/results

Writes topk_<gpu>.json and topk_<gpu>.md.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from benchmarks.kernels import environment, graph_ms, median_ms
from benchmarks.records import write
from runtime.kernels.reference import REFERENCE_OPS

SHAPES = [(n, t, k) for n in (8192, 65536, 131072) for t in (1, 8, 64) for k in (512, 2048)]
DISTRIBUTIONS = ("randn", "relu")


@dataclass
class Row:
    dist: str
    n: int
    t: int
    k: int
    tiling: str  # the Triton kernel's groups:num_warps[:unroll]
    ids_equal: bool
    sort_ms: float
    topk_ms: float
    triton_ms: float
    sort_graph_ms: float | None
    topk_graph_ms: float | None
    triton_graph_ms: float | None


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


def measure(kernels: dict, dist: str, n: int, t: int, k: int) -> list[Row]:
    """One row per Triton tiling; the sort and torch.topk paths are timed once per shape."""
    scores = scores_for(dist, t, n)
    want = sort_entries(scores, k)
    sort_ms, sort_graph = times(sort_entries, scores, k)
    topk_ms, topk_graph = times(REFERENCE_OPS["topk"], scores, k)
    rows = []
    for name, fused in kernels.items():
        equal = torch.equal(fused(scores, k), want)
        triton_ms, triton_graph = times(fused, scores, k)
        rows.append(Row(dist, n, t, k, name, equal, sort_ms, topk_ms, triton_ms, sort_graph, topk_graph,
                        triton_graph))
    return rows


def parse_tilings(text: str) -> dict[str, tuple[int, ...]] | None:
    """"4096:8,8192:16:4" -> {"4096:8": (4096, 8), "8192:16:4": (8192, 16, 4)}: groups,
    num_warps and optionally unroll (TopkTiling's default otherwise); None when malformed."""
    out = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        fields = part.split(":")
        if len(fields) not in (2, 3) or not all(f.isdigit() for f in fields):
            return None
        out[part] = tuple(int(f) for f in fields)
    return out or None


def fmt(ms: float | None) -> str:
    return "n/a" if ms is None else f"{ms:.4f}"


def markdown(env: dict, rows: list[Row], command: str) -> str:
    lines = [
        "# Top-k benchmark: dense sort vs torch.topk path vs Triton radix select", "",
        f"- GPU: {env['gpu']} ({env['nvidia_smi']}); torch {env['torch']}, triton {env['triton']}, "
        f"CUDA {env['cuda']}",
        f"- Command: `{command}`",
        "- eager = median of 20 CUDA-event timings of one call (Python + launches); graph = per-call "
        "device time replaying 20 calls from one CUDA graph. ids equal = Triton ids == the sort's.", "",
        "| scores | N | T | k | tiling | ids equal | sort eager ms | torch.topk eager ms | Triton eager ms "
        "| sort graph ms | torch.topk graph ms | Triton graph ms | Triton vs torch.topk (graph) |",
        "|---|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ratio = (f"{r.topk_graph_ms / r.triton_graph_ms:.1f}x"
                 if r.topk_graph_ms is not None and r.triton_graph_ms else "n/a")
        lines.append(f"| {r.dist} | {r.n} | {r.t} | {r.k} | {r.tiling} | {'yes' if r.ids_equal else '**NO**'} | "
                     f"{r.sort_ms:.4f} | {r.topk_ms:.4f} | {r.triton_ms:.4f} | {fmt(r.sort_graph_ms)} | "
                     f"{fmt(r.topk_graph_ms)} | {fmt(r.triton_graph_ms)} | {ratio} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--dist", nargs="+", choices=DISTRIBUTIONS, default=list(DISTRIBUTIONS),
                        help="score distributions to run")
    parser.add_argument("--tilings", default="4096:8",
                        help="comma-separated Triton tilings to time, groups:num_warps[:unroll] (TopkTiling)")
    args = parser.parse_args(argv)
    tilings = parse_tilings(args.tilings)
    if tilings is None:
        print(f"benchmarks/topk.py: --tilings: expected groups:num_warps[:unroll][,...] e.g. 4096:8,8192:16:4, "
              f"got {args.tilings!r}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("benchmarks/topk.py: needs a CUDA GPU", file=sys.stderr)
        return 2
    from runtime.kernels.topk import FusedTopk, TopkTiling

    try:
        names = ("groups", "num_warps", "unroll")
        kernels = {name: FusedTopk(TopkTiling(**dict(zip(names[: len(fields)], fields, strict=True))))
                   for name, fields in tilings.items()}
    except ValueError as exc:
        print(f"benchmarks/topk.py: --tilings: {exc}", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    rows = []
    for dist in args.dist:
        for n, t, k in SHAPES:
            for row in measure(kernels, dist, n, t, k):
                rows.append(row)
                print(f"{dist:5s} N={n:6d} T={t:2d} k={k:4d} {row.tiling:8s} equal={row.ids_equal!s:5s} "
                      f"eager sort {row.sort_ms:.4f} topk {row.topk_ms:.4f} triton {row.triton_ms:.4f} | "
                      f"graph sort {fmt(row.sort_graph_ms)} topk {fmt(row.topk_graph_ms)} "
                      f"triton {fmt(row.triton_graph_ms)}", flush=True)
    env = environment()
    command = "PYTHONPATH=. python " + " ".join(["benchmarks/topk.py", *(argv or sys.argv[1:])])
    doc = {"environment": env, "command": command, "rows": [asdict(r) for r in rows]}
    tag = env["gpu"].split()[-1].lower()
    write(args.out, f"topk_{tag}", doc, markdown(env, rows, command))
    return 0 if all(r.ids_equal for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
