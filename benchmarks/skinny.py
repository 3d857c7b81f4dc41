"""The decode step's projections and routed experts: cuBLAS / grouped GEMM (the
references) vs the fused skinny kernels (runtime/kernels/skinny.py, experts.py), per shape
and row count, with an optional sweep of the tilings.

Why: a replayed ``mid`` step at batch 1 spent 3.3 of its 5.5 ms of kernel time in GEMMs
and grouped GEMMs reading weights at 0.4-1.6 TB/s (benchmarks/results/step_profile_h200.md).

Timing: device time per call replayed from a CUDA graph of ``--reps`` calls, each call on
the next of enough weight copies (or expert picks) that the weights read in one replay
exceed the L2 twice over, as in a step, where every projection reads a weight no earlier
op of the step has read. Parity: every variant's output against a float64 recompute
(max |diff| / max |ref|), on random inputs drawn per shape.

    PYTHONPATH=. python benchmarks/skinny.py --rows 1 8 64 --out "$OUT"
    PYTHONPATH=. python benchmarks/skinny.py --rows 1 --sweep --out "$OUT"

Writes skinny_<gpu>.json/.md. CUDA only.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import torch

from benchmarks.ceilings import H200_ISSUE
from benchmarks.kernels import environment, median_ms
from benchmarks.records import command_line, gpu_tag, write

HBM_BYTES_PER_S = H200_ISSUE.copy_bytes_per_s
L2_BYTES = 60 * 2**20


def shapes(config) -> list[tuple[str, int, int, int]]:
    """(name, groups, N, K) of the step's projections at ``config``."""
    c = config
    h = c.num_attention_heads * c.head_dim
    return [
        ("wq_a / wkv", 1, c.q_lora_rank, c.hidden_size),
        ("wq_b", 1, h, c.q_lora_rank),
        ("wo_a (grouped)", c.o_groups, c.o_lora_rank, h // c.o_groups),
        ("wo_b", 1, c.hidden_size, c.o_groups * c.o_lora_rank),
        ("index wq_b", 1, c.index_n_heads * c.index_head_dim, c.q_lora_rank),
        ("shared w1 / w3", 1, c.moe_intermediate_size, c.hidden_size),
        ("shared w2", 1, c.hidden_size, c.moe_intermediate_size),
        ("head", 1, c.vocab_size, c.hidden_size),
    ]


def replay_ms(calls, reps: int) -> float:
    """Per-call device time of ``calls`` (a list of closures, run in turn) replayed from
    one CUDA graph of ``reps`` calls."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for fn in calls:
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(reps):
            calls[i % len(calls)]()
    return median_ms(graph.replay, warmup=2, iters=7) / reps


def rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    return float((got.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def linear_rows(config, rows_list, variants, reps: int) -> list[dict]:
    from runtime.kernels.reference import linear

    out = []
    for name, g, n, k in shapes(config):
        bytes_w = g * n * k * 2
        copies = max(1, min(64, -(-2 * L2_BYTES // bytes_w)))
        weights = [torch.randn(g, n, k, device="cuda", dtype=torch.bfloat16) * k**-0.5 for _ in range(copies)]
        if g == 1:
            weights = [w[0] for w in weights]
        for m in rows_list:
            x = torch.randn(m, g, k, device="cuda", dtype=torch.bfloat16) if g > 1 else \
                torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            want = (torch.einsum("rgk,gnk->rgn", x.double(), weights[0].double()) if g > 1
                    else x.double() @ weights[0].double().T)
            for label, fn in [("cuBLAS", linear), *variants]:
                if label != "cuBLAS" and not fn.runs_kernel(x, weights[0]):
                    continue
                err = rel_err(fn(x, weights[0]), want)
                ms = replay_ms([lambda w=w, f=fn, a=x: f(a, w) for w in weights], reps)
                tiles = "" if label == "cuBLAS" else str(fn.policy.tiling(g, m, n, k))
                out.append({"op": name, "groups": g, "n": n, "k": k, "rows": m, "variant": label, "tiling": tiles,
                            "us": ms * 1e3, "tb_s": (bytes_w + m * g * (n + k) * 2) / (ms * 1e-3) / 1e12,
                            "rel_err": err})
                print(f"{name:15s} rows {m:3d} {label:26s} {ms * 1e3:8.2f} us  {out[-1]['tb_s']:5.2f} TB/s  "
                      f"err {err:.1e} {tiles}", flush=True)
        del weights
    return out


def experts_rows(config, rows_list, variants, reps: int) -> list[dict]:
    from runtime.grouped_moe import StackedExperts, routed_experts
    from runtime.layer_subset import LayerSubset
    from runtime.numerics import Numerics
    from runtime.weights import V41Weights

    c = LayerSubset((0,)).apply(config)  # one layer's experts are all this needs
    weights = V41Weights.random(c, 0, device="cuda", draw_on_device=True, dtype=torch.bfloat16)
    ffn = weights.layers[0].ffn
    stacked = StackedExperts.from_ffn(ffn, c.n_routed_experts)
    num = Numerics()
    k = c.num_experts_per_tok
    gen = torch.Generator(device="cuda").manual_seed(0)
    out = []
    for t in rows_list:
        x = torch.randn(t, c.hidden_size, device="cuda", dtype=torch.bfloat16)
        picks = [torch.stack([torch.randperm(c.n_routed_experts, device="cuda", generator=gen)[:k]
                              for _ in range(t)]) for _ in range(16)]
        scale = torch.rand(t, k, device="cuda", generator=gen) / k
        want = routed_experts(x.double(), scale.double(), picks[0],
                              ffn_double(ffn), StackedExperts(stacked.w13.double(), stacked.w2.double(),
                                                              stacked.expert_ids, stacked.shared), c, num)
        touched = t * (k + int(stacked.shared))
        bytes_w = touched * 3 * c.hidden_size * c.moe_intermediate_size * 2
        routed_only = StackedExperts(stacked.w13[:-1], stacked.w2[:-1], stacked.expert_ids[:-1])
        for label, fn in [("grouped GEMM", routed_experts), ("grouped GEMM, routed-only stack", routed_experts),
                          *variants]:
            if fn is not routed_experts and not fn.runs_kernel(picks[0], stacked, c, num):
                continue
            stack = routed_only if label.endswith("routed-only stack") else stacked
            err = rel_err(fn(x, scale, picks[0], ffn, stack, c, num), want)
            ms = replay_ms([lambda p=p, f=fn, st=stack, a=x, sc=scale: f(a, sc, p, ffn, st, c, num) for p in picks],
                           reps)
            tiles = "" if label.startswith("grouped") else str(fn.policy.tiling(t * (k + 1), 1, c.moe_intermediate_size,
                                                                                  c.hidden_size))
            out.append({"op": "experts", "rows": t, "variant": label, "tiling": tiles, "us": ms * 1e3,
                        "tb_s": bytes_w / (ms * 1e-3) / 1e12, "rel_err": err})
            print(f"experts        rows {t:3d} {label:26s} {ms * 1e3:8.2f} us  {out[-1]['tb_s']:5.2f} TB/s  "
                  f"err {err:.1e} {tiles}", flush=True)
    return out


class _Double:
    """A weight node whose ``weight`` is a float64 copy (the recompute's shared expert)."""

    def __init__(self, w):
        self.weight = w.double()


def ffn_double(ffn):
    sh = ffn.shared_experts
    node = type("Shared", (), {})()
    node.w1, node.w2, node.w3 = _Double(sh.w1.weight), _Double(sh.w2.weight), _Double(sh.w3.weight)
    return type("Ffn", (), {"shared_experts": node})()


def variants(sweep: bool, experts: bool):
    """(label, fused callable) pairs: the default policy (which sends some calls to the
    reference), the kernel on every call, and with ``sweep`` the tilings around it."""
    from runtime.kernels.experts import FusedExperts
    from runtime.kernels.skinny import FusedLinear
    from runtime.kernels.skinny_tiles import ExpertsPolicy, SkinnyPolicy

    if experts:
        default, every, make = ExpertsPolicy(), ExpertsPolicy(max_pairs=1 << 20), FusedExperts
    else:
        default, every, make = SkinnyPolicy(), SkinnyPolicy(max_rows=1 << 20, max_n=1 << 20), FusedLinear
    out = [("fused (default)", make(default)), ("kernel (every call)", make(every))]
    if sweep:
        tiles = [(16, 128), (16, 256), (32, 64), (32, 256), (64, 64), (64, 128)]
        grid = [{"block_n": n, "block_k": k} for n, k in tiles]
        grid += [{"programs": every.programs // 2}, {"programs": every.programs * 2}]
        if not experts:
            grid += [{"programs_one_row": every.programs_one_row // 4}, {"programs_one_row": every.programs_one_row // 2}]
        grid += [{"num_warps": w} for w in (2, 8)]
        for change in grid:
            p = replace(every, **change)
            out.append((" ".join(f"{k}={v}" for k, v in change.items()), make(p)))
    return out


def markdown(doc: dict) -> str:
    env = doc["environment"]
    lines = [f"# Skinny GEMMs and routed experts at decode rows: references vs fused (`{doc['config']}` shapes)", "",
             f"- GPU: {env['gpu']} ({env['nvidia_smi']}); torch {env['torch']}, triton {env['triton']}, "
             f"CUDA {env['cuda']}", f"- Command: `{doc['command']}`",
             "- Device time per call replayed from a CUDA graph, each call on the next of enough weight copies / "
             "expert picks to exceed the L2 twice over; TB/s = weight + activation bytes / time; err = max |diff| / "
             "max |ref| against a float64 recompute. `default`: the registry's policy (`= ref`: it sends the call "
             "to the reference); `kernel`: the kernel on every call; `best`: the fastest kernel tiling swept.", "",
             "| op | rows | reference us | default us | kernel us | kernel / reference | best us | best tiling "
             "| kernel TB/s | err |", "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    groups: dict = {}
    for r in doc["rows"]:
        groups.setdefault((r["op"], r["rows"]), []).append(r)
    for (op, rows), rs in groups.items():
        ref = rs[0]
        by = {r["variant"]: r for r in rs}
        default, every = by.get("fused (default)"), by.get("kernel (every call)")
        kernels = [r for r in rs if not r["variant"].startswith(("grouped", "cuBLAS", "fused (default)"))]
        if every is None:
            lines.append(f"| {op} | {rows} | {ref['us']:.2f} | = ref | - | - | - | - | - | - |")
            continue
        best = min(kernels, key=lambda r: r["us"])
        lines.append(f"| {op} | {rows} | {ref['us']:.2f} | {default['us'] if default else ref['us']:.2f}"
                     f"{'' if default else ' (= ref)'} | {every['us']:.2f} | {every['us'] / ref['us']:.2f} | "
                     f"{best['us']:.2f} | {best['variant']}: {best['tiling']} | {every['tb_s']:.2f} | "
                     f"{max(r['rel_err'] for r in kernels):.1e} |")
    extra = [r for r in doc["rows"] if r["variant"] == "grouped GEMM, routed-only stack"]
    if extra:
        lines += ["", "The grouped GEMM with the shared expert in the stack (one more, empty, group) vs without it:", ""]
        lines += [f"- {r['rows']} rows: {groups[('experts', r['rows'])][0]['us']:.2f} us vs {r['us']:.2f} us"
                  for r in extra]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="mid")
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--expert-rows", type=int, nargs="+", default=[1, 2, 4, 8, 64])
    parser.add_argument("--ops", nargs="+", default=["linear", "experts"], choices=["linear", "experts"])
    parser.add_argument("--sweep", action="store_true", help="also time the tilings around the default")
    parser.add_argument("--reps", type=int, default=32)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("benchmarks/skinny.py: needs a CUDA GPU", file=sys.stderr)
        return 2
    if min(args.rows + args.expert_rows) < 1 or args.reps < 1:
        print("benchmarks/skinny.py: --rows, --expert-rows and --reps must be positive", file=sys.stderr)
        return 2
    from runtime.config import V41Config

    config = V41Config.preset(args.preset)
    rows = []
    if "linear" in args.ops:
        rows += linear_rows(config, args.rows, variants(args.sweep, False), args.reps)
    if "experts" in args.ops:
        rows += experts_rows(config, args.expert_rows, variants(args.sweep, True), args.reps)
    doc = {"config": args.preset, "rows": rows, "environment": environment(),
           "command": command_line("benchmarks/skinny.py", argv or sys.argv[1:]),
           }
    tag = gpu_tag(doc["environment"]["gpu"])
    write(args.out, f"skinny_{tag}{'_sweep' if args.sweep else ''}", doc, markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
