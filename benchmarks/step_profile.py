"""Where a replayed static decode step's device time goes: CUDA kernel time per replay by
kernel, by kind of kernel, and (from one eager step) by the op and layer that launched it.

Why: at batch 1 a `mid` step replayed from a CUDA graph took 5.90 ms
(benchmarks/results/decode_h200_stepops.md) against a 0.86 ms bandwidth floor, and the
eager step launches about 2,400 kernels. Whether the gap is the kernels' own time (slow
GEMVs, small grids) or the time between them (one graph node after another) decides
what to cut; a kernel count alone cannot say which.

Measured per batch size, after the step is built as ``benchmarks/decode.py`` builds its
``graphs+compile`` variant (requests prefilled to ``--context``, compiled helpers):
- ``replay ms``: median of ``--replays`` graph replays timed with CUDA events;
- from torch.profiler over the same number of replays: kernels per replay, the sum of
  their durations, ``busy`` (the union of their intervals, so overlap counts once) and
  ``idle`` (replay span minus busy: the gaps between kernels);
- the kernels by name and by kind (``kernel_kind``: cuBLAS GEMMs, the grouped GEMM,
  inductor's fused kernels, the registry's Triton kernels, elementwise, reductions,
  index/scatter, sort, copies);
- one eager step under the profiler with a range per layer and per registry op: each
  kernel's device time charged to the op that launched it (its name and input shapes),
  and per layer.

    PYTHONPATH=. python benchmarks/step_profile.py --batches 1 64 --context 1024 --out "$OUT"

Writes step_profile_<gpu>.json/.md. CUDA only.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

import torch

from benchmarks.records import command_line, gpu_tag, write

# Kinds of kernel by name, first match wins (names as the CUDA profiler reports them).
KINDS = (
    ("inductor", re.compile(r"^triton_")),
    ("grouped GEMM", re.compile(r"grouped|Group", re.I)),
    ("GEMM", re.compile(r"nvjet|gemm|gemv|cutlass|xmma|cublas|splitKreduce", re.I)),
    ("registry Triton", re.compile(r"^_\w+_kernel$")),
    ("copy", re.compile(r"^Memcpy|^Memset|copy", re.I)),
    ("sort", re.compile(r"sort|radix|cub::", re.I)),
    ("index/scatter", re.compile(r"index|scatter|gather", re.I)),
    ("reduction", re.compile(r"reduce", re.I)),
    ("elementwise", re.compile(r"elementwise", re.I)),
)


def kernel_kind(name: str) -> str:
    for kind, pattern in KINDS:
        if pattern.search(name):
            return kind
    return "other"


def device_events(events) -> list[tuple[str, float, float]]:
    """(name, start us, duration us) of every device-side event (kernels, copies, sets)."""
    out = []
    for ev in events:
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            out.append((ev.name, float(ev.time_range.start), float(ev.time_range.elapsed_us())))
    return sorted(out, key=lambda k: k[1])


def busy_us(kernels: list[tuple[str, float, float]]) -> float:
    """Length of the union of the kernels' intervals (concurrent kernels count once)."""
    total, end = 0.0, float("-inf")
    for _, start, dur in kernels:
        stop = start + dur
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def replay_summary(kernels: list[tuple[str, float, float]], replays: int) -> dict:
    """Per-replay figures of ``replays`` back-to-back replays' kernels: count, sum of
    durations, busy, and the span from first start to last end (per replay)."""
    span = (kernels[-1][1] + kernels[-1][2] - kernels[0][1]) if kernels else 0.0
    by_name: dict[str, list[float]] = defaultdict(list)
    for name, _, dur in kernels:
        by_name[name].append(dur)
    names = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))
    kinds: dict[str, list[float]] = defaultdict(list)
    for name, durs in by_name.items():
        kinds[kernel_kind(name)] += durs
    per = 1.0 / replays
    return {
        "kernels": len(kernels) * per, "kernel_us": sum(d for *_, d in kernels) * per,
        "busy_us": busy_us(kernels) * per, "span_us": span * per,
        "by_name": [{"name": n, "kind": kernel_kind(n), "count": len(d) * per, "us": sum(d) * per,
                     "mean_us": statistics.fmean(d)} for n, d in names],
        "by_kind": {k: {"count": len(d) * per, "us": sum(d) * per}
                    for k, d in sorted(kinds.items(), key=lambda kv: -sum(kv[1]))},
    }


def attribute(events) -> tuple[list[dict], dict[str, float]]:
    """Each kernel's device time charged to the CPU op that launched it (label: the
    registry op around it if any, else the op's name and input shapes) and to its layer."""
    from benchmarks.step_ops import _where

    by_label: dict[str, list[float]] = defaultdict(list)
    per_layer: Counter = Counter()
    for ev in events:
        launched = [k for k in getattr(ev, "kernels", []) if k.duration]
        if not launched or ev.device_type != torch.autograd.DeviceType.CPU:
            continue
        layer, registry, _ = _where(ev)
        if ev.name.startswith("registry "):
            registry = ev.name.split()[1]
        shapes = ",".join("x".join(map(str, s)) for s in (ev.input_shapes or []) if s)
        label = f"registry {registry}" if registry else f"{ev.name} [{shapes}]"
        us = sum(k.duration for k in launched)
        by_label[label].append(us)
        per_layer[layer] += us
    rows = [{"label": lab, "calls": len(d), "us": sum(d), "us_per_call": statistics.fmean(d)}
            for lab, d in sorted(by_label.items(), key=lambda kv: -sum(kv[1]))]
    return rows, dict(per_layer)


def profile_batch(args, weights, batch: int, gen) -> dict:
    from benchmarks.decode import StaticRunner, prefilled_snaps, slab_len
    from benchmarks.step_ops import traced_step
    from runtime.static.graphs import preserved

    c = weights.config
    device = weights.embed.weight.device
    prompts, snaps, _ = prefilled_snaps(weights, batch, args.context, args.prefill_batch, gen)
    runner = StaticRunner(weights, "fused", snaps, slab_len(c, args.context, 2 * args.replays + 8),
                          graphs=True, compiled=True)
    tokens = torch.tensor([int(p[-1]) for p in prompts], device=device)
    for _ in range(3):
        runner(tokens)
    torch.cuda.synchronize(device)
    times = []
    for _ in range(args.replays):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        runner.slab.reserve(batch)
        start.record()
        runner.graphs(tokens)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(args.replays):
            runner(tokens)
        torch.cuda.synchronize(device)
    replay = replay_summary(device_events(prof.events()), args.replays)
    # One eager step of the same (compiled) step, for the op and layer each kernel belongs to.
    with preserved(runner.slab), traced_step(runner.decoder), \
            torch.profiler.profile(activities=activities, record_shapes=True) as eager:
        runner.decoder.step(tokens)
        torch.cuda.synchronize(device)
    ops, per_layer = attribute(eager.events())
    runner.release()
    return {"batch": batch, "context": args.context, "replay_ms": statistics.median(times),
            "replay_ms_all": times, "replay": replay, "eager_ops": ops, "eager_per_layer_us": per_layer,
            "eager_kernel_us": sum(per_layer.values())}


def markdown(doc: dict, top: int) -> str:
    env = doc["environment"]
    lines = [f"# Where a replayed `{doc['config']}` decode step's time goes (graphs + compile, fused)", "",
             f"- GPU: {env['gpu']} ({env['nvidia_smi']}); torch {env['torch']}, triton {env['triton']}, "
             f"CUDA {env['cuda']}",
             f"- Command: `{doc['command']}`",
             "- `replay ms`: median graph replay (CUDA events). Profiler over the same number of replays: "
             "kernels per replay, sum of their durations, `busy` (union of their intervals), `idle` "
             "(first start to last end, minus busy). Eager attribution: one eager step of the same "
             "compiled step, kernel time charged to the launching op (registry ops as one label).", "",
             "| batch | context | replay ms | kernels | kernel ms | busy ms | idle ms | eager kernel ms |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in doc["rows"]:
        p = r["replay"]
        lines.append(f"| {r['batch']} | {r['context']} | {r['replay_ms']:.3f} | {p['kernels']:.0f} | "
                     f"{p['kernel_us'] / 1e3:.3f} | {p['busy_us'] / 1e3:.3f} | "
                     f"{(p['span_us'] - p['busy_us']) / 1e3:.3f} | {r['eager_kernel_us'] / 1e3:.3f} |")
    for r in doc["rows"]:
        p = r["replay"]
        lines += ["", f"## batch {r['batch']}", "", "By kind (per replay):", "",
                  "| kind | kernels | us |", "|---|---:|---:|"]
        lines += [f"| {k} | {v['count']:.0f} | {v['us']:.1f} |" for k, v in p["by_kind"].items()]
        lines += ["", f"Kernels by time (per replay, top {top}):", "",
                  "| kernel | kind | count | us | mean us |", "|---|---|---:|---:|---:|"]
        lines += [f"| `{k['name'][:100]}` | {k['kind']} | {k['count']:.0f} | {k['us']:.1f} | {k['mean_us']:.2f} |"
                  for k in p["by_name"][:top]]
        lines += ["", f"Eager step, device time by launching op (top {top}):", "",
                  "| op [input shapes] | calls | us | us per call |", "|---|---:|---:|---:|"]
        lines += [f"| `{o['label'][:110]}` | {o['calls']} | {o['us']:.1f} | {o['us_per_call']:.2f} |"
                  for o in r["eager_ops"][:top]]
        lines += ["", "Eager step, device us per layer: " + ", ".join(
            f"{k.replace('layer ', 'L')} {v:.0f}" for k, v in r["eager_per_layer_us"].items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from benchmarks.decode import environment

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="mid")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--replays", type=int, default=20)
    parser.add_argument("--prefill-batch", type=int, default=16)
    parser.add_argument("--top", type=int, default=40, help="rows per table in the MD")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("benchmarks/step_profile.py: needs a CUDA GPU", file=sys.stderr)
        return 2
    if args.replays < 1 or any(b < 1 for b in args.batches) or args.context < 1:
        print("benchmarks/step_profile.py: --replays, --batches and --context must be positive", file=sys.stderr)
        return 2
    from runtime.config import V41Config
    from runtime.weights import V41Weights

    device = torch.device("cuda")
    weights = V41Weights.random(V41Config.preset(args.preset), args.seed, device=device, draw_on_device=True,
                                dtype=torch.bfloat16)
    gen = torch.Generator().manual_seed(args.seed)
    rows = [profile_batch(args, weights, b, gen) for b in args.batches]
    doc = {"config": args.preset, "rows": rows, "environment": environment(device),
           "command": command_line("benchmarks/step_profile.py", argv or sys.argv[1:])}
    write(args.out, f"step_profile_{gpu_tag(doc['environment']['gpu'])}", doc, markdown(doc, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
