"""Prefill TTFT: exact SWA vs bounded replay's decoder trim, as ratios in one run.

Why a ratio in one run: absolute CPU/GPU times drift with load; the two variants are
measured interleaved on the same weights (one ``V41Weights`` shared by two models), so
the ratio is what the trim buys on this machine at this moment. Beside it the script
prints the ideal speed-up: all layers / layers that still run on every prompt token
(with the vLLM cut, layers 0..last KV source), the bound if the trimmed layers cost
nothing and every layer costs the same.

Usage (tiny on CPU; mid on one GPU):

    python benchmarks/prefill.py --preset tiny --lengths 1024 4096 --repeats 3
    python benchmarks/prefill.py --preset mid --device cuda --lengths 1024 4096 16384

    # the batched fixed-shape form (benchmarks/prefill_batched.py), eager or from CUDA graphs:
    python benchmarks/prefill.py --preset tiny --path batched --lengths 256 1024
    python benchmarks/prefill.py --preset mid --device cuda --dtype bfloat16 --path batched --graphs \
        --lengths 1024 4096 16384

Writes ``benchmarks/results/prefill-<preset>-<device>[-batched[-graphs]].json`` and a
Markdown note next to it (hardware, versions, command, table). Engine path: single
request, prefix cache off, greedy, one generated token; TTFT is the engine's
per-request time to the first token. Batched path: one [1, N] prefill call to the last
position's logits (no engine, no sampling), grouped MoE unless ``--moe dense``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class BenchSettings:
    preset: str
    device: str
    dtype: str | None
    lengths: tuple[int, ...]
    repeats: int
    chunk: int | None
    cut: str
    seed: int
    threads: int | None
    path: str = "engine"  # "engine" (V41Model through the Engine) | "batched" (runtime.batched.prefill)
    graphs: bool = False  # batched path: replay each variant's two segments from CUDA graphs
    moe: str = "grouped"  # batched path: "grouped" | "dense" routed experts


def ideal_speedup(config, cut: str) -> tuple[float, int]:
    """(all layers / layers on every token, layers on every token) for the decoder trim."""
    last = config.last_kv_source
    every = last + 1 if cut == "after" else last
    return config.num_hidden_layers / every, every


def _engine(weights, swa: str, cut: str, chunk: int):
    from runtime.engine.engine import Engine, EngineConfig
    from runtime.model import V41Model
    from runtime.options import RuntimeOptions

    options = RuntimeOptions(swa="exact") if swa == "exact" else RuntimeOptions(
        swa="bounded", encoder_replay=False, decoder_trim=True, cut=cut)
    model = V41Model(weights, options)
    cfg = EngineConfig(prefill_chunk_tokens=chunk, max_batch_requests=1, prefix_cache_entries=0)
    return Engine(model, config=cfg)


def _ttft(engine, prompt: list[int], device: str) -> tuple[float, float]:
    """(wall-clock TTFT from the engine's timings, process CPU seconds of the call).

    On a shared CPU machine the wall clock includes time the process waited for a
    core; the CPU time counts only work done, so its ratio is the steadier one there.
    On a GPU only the wall clock means anything.
    """
    from runtime.engine.requests import GenerateRequest

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    cpu0 = time.process_time()
    result = engine.generate_one(GenerateRequest(prompt_ids=tuple(prompt), max_tokens=1))
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return result.timings.ttft_s, time.process_time() - cpu0


def run(settings: BenchSettings, on_row=None) -> dict:
    """Measure every length; ``on_row(doc)`` is called with the partial document after
    each length, so a run cut short still leaves its finished rows on disk."""
    from runtime.config import V41Config
    from runtime.weights import V41Weights

    if settings.threads:
        torch.set_num_threads(settings.threads)
    config = V41Config.preset(settings.preset)
    dtype = getattr(torch, settings.dtype) if settings.dtype else config.dtype
    t = time.perf_counter()
    weights = V41Weights.random(config, settings.seed, dtype=dtype, device=settings.device)
    init_s = time.perf_counter() - t
    ideal, every = ideal_speedup(config, settings.cut)
    gen = torch.Generator().manual_seed(settings.seed)
    rows = []
    stacked = None
    if settings.path == "batched" and settings.moe == "grouped":
        from runtime.grouped_moe import stack_all_layers

        stacked = stack_all_layers(weights)  # once for every length and both variants
    for n in settings.lengths:
        if settings.path == "batched":
            from benchmarks.prefill_batched import measure_length

            m = measure_length(weights, settings, n, gen, stacked)
            row = _row(n, n, m["wall"]["exact"], m["wall"]["trimmed"], m["cpu"]["exact"], m["cpu"]["trimmed"],
                       ideal)
            row["graph_equals_eager"] = m["graph_equals_eager"]
        else:
            row = _engine_row(weights, settings, n, gen, ideal)
        rows.append(row)
        print(f"{n:>6} tokens: exact {row['exact_ttft_s']:.3f} s, bounded {row['bounded_ttft_s']:.3f} s, "
              f"speed-up {row['speedup']:.2f}x wall / {row['speedup_cpu_time']:.2f}x CPU time "
              f"(ideal {ideal:.2f}x)", file=sys.stderr, flush=True)
        if on_row is not None:
            on_row(_document(settings, config, every, init_s, rows))
    return _document(settings, config, every, init_s, rows)


def _engine_row(weights, settings: BenchSettings, n: int, gen: torch.Generator, ideal: float) -> dict:
    """TTFT of the engine's exact and bounded (trimmed) variants, interleaved."""
    config = weights.config
    chunk = settings.chunk or n
    engines = {v: _engine(weights, v, settings.cut, chunk) for v in ("exact", "bounded")}
    prompt = torch.randint(3, config.vocab_size, (n,), generator=gen).tolist()
    _ttft(engines["exact"], prompt[: min(n, 256)], settings.device)  # warm-up
    _ttft(engines["bounded"], prompt[: min(n, 256)], settings.device)
    wall: dict[str, list[float]] = {"exact": [], "bounded": []}
    cpu: dict[str, list[float]] = {"exact": [], "bounded": []}
    for r in range(settings.repeats):
        order = ("exact", "bounded") if r % 2 == 0 else ("bounded", "exact")
        for variant in order:
            w, c = _ttft(engines[variant], prompt, settings.device)
            wall[variant].append(w)
            cpu[variant].append(c)
    return _row(n, chunk, wall["exact"], wall["bounded"], cpu["exact"], cpu["bounded"], ideal)


def _row(n: int, chunk: int, exact_runs: list[float], bounded_runs: list[float], exact_cpu_runs: list[float],
         bounded_cpu_runs: list[float], ideal: float) -> dict:
    """One length's medians and ratios ("bounded" = the decoder-trimmed variant)."""
    exact, bounded = statistics.median(exact_runs), statistics.median(bounded_runs)
    exact_cpu, bounded_cpu = statistics.median(exact_cpu_runs), statistics.median(bounded_cpu_runs)
    speedup, speedup_cpu = exact / bounded, exact_cpu / bounded_cpu
    return {
        "tokens": n,
        "chunk": chunk,
        "exact_ttft_s": exact,
        "bounded_ttft_s": bounded,
        "exact_runs_s": exact_runs,
        "bounded_runs_s": bounded_runs,
        "speedup": speedup,
        "exact_cpu_s": exact_cpu,
        "bounded_cpu_s": bounded_cpu,
        "exact_cpu_runs_s": exact_cpu_runs,
        "bounded_cpu_runs_s": bounded_cpu_runs,
        "speedup_cpu_time": speedup_cpu,
        "ideal_speedup": ideal,
        "ratio_to_ideal": speedup / ideal,
        "ratio_to_ideal_cpu_time": speedup_cpu / ideal,
    }


def _document(settings: BenchSettings, config, every: int, init_s: float, rows: list[dict]) -> dict:
    return {
        "settings": settings.__dict__ | {"lengths": list(settings.lengths)},
        "layers": config.num_hidden_layers,
        "layers_on_every_token": every,
        "weights_init_s": init_s,
        "environment": environment(settings.device),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "rows": list(rows),
    }


def environment(device: str) -> dict:
    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "device": device,
    }
    if device.startswith("cuda") and torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
        env["cuda"] = torch.version.cuda
    return env


def markdown(doc: dict, command: str) -> str:
    s = doc["settings"]
    env = doc["environment"]
    path = s.get("path", "engine")
    batched = path == "batched"
    how = (f"the batched fixed-shape form (runtime/batched/prefill.py), {s['moe']} MoE, "
           + ("both segments replayed from CUDA graphs" if s.get("graphs") else "eager")) if batched else "the engine"
    lines = [
        f"# Prefill TTFT: exact vs bounded (decoder trim), `{s['preset']}` on {s['device']}, {how}",
        "",
        f"Command: `{command}`",
        "",
        f"Hardware: {env.get('gpu', env['processor'])}, {env['cpu_count']} CPUs "
        f"({env['torch_threads']} torch threads); {env['platform']}; "
        f"Python {env['python']}, torch {env['torch']}" + (f", CUDA {env['cuda']}" if "cuda" in env else ""),
        "",
        f"Single request, prefix cache off, greedy, 1 output token; cut `{s['cut']}`; median of "
        f"{s['repeats']} interleaved runs. Ideal = {doc['layers']} layers / "
        f"{doc['layers_on_every_token']} layers that still run on every prompt token.",
        "",
        ("Wall = one batched prefill call to the last-position logits (B = 1, device drained before "
         "and after)" if batched else "Wall = the engine's TTFT") + "; CPU = the process's CPU seconds for the",
        "same call (steadier on a shared machine, meaningless on a GPU).",
        "",
        "| tokens | chunk | exact TTFT (s) | bounded TTFT (s) | speed-up (wall) | speed-up (CPU time) "
        "| ideal | wall / ideal | CPU / ideal |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in doc["rows"]:
        lines.append(
            f"| {r['tokens']} | {r['chunk']} | {r['exact_ttft_s']:.3f} | {r['bounded_ttft_s']:.3f} | "
            f"{r['speedup']:.2f}x | {r['speedup_cpu_time']:.2f}x | {r['ideal_speedup']:.2f}x | "
            f"{r['ratio_to_ideal']:.0%} | {r['ratio_to_ideal_cpu_time']:.0%} |"
        )
    checks = [(r["tokens"], r["graph_equals_eager"]) for r in doc["rows"] if r.get("graph_equals_eager")]
    if checks:
        lines += ["", "Graph replay equals the eager call bit for bit: " + "; ".join(
            f"{n} tokens " + ", ".join(f"{v} {'yes' if ok else 'NO'}" for v, ok in eq.items()) for n, eq in checks)]
    lines.append("")
    return "\n".join(lines)


def _check(args) -> str | None:
    """The one-line problem with the flags, or None."""
    if any(n < 1 for n in args.lengths):
        return f"--lengths: expected token counts >= 1, got {args.lengths}"
    if args.repeats < 1:
        return f"--repeats: expected >= 1, got {args.repeats}"
    if args.path == "engine" and (args.graphs or args.moe != "grouped"):
        return "--graphs and --moe apply to --path batched only (the engine's prefill is not capturable)"
    if args.path == "batched" and args.chunk is not None:
        return "--chunk: the batched path prefills the whole prompt in one call"
    if args.graphs and not (args.device.startswith("cuda") and torch.cuda.is_available()):
        return f"--graphs: CUDA graphs need --device cuda and a visible GPU (got --device {args.device})"
    if args.path == "batched" and args.moe == "grouped" and args.device.startswith("cuda"):
        from runtime.config import V41Config

        dtype = args.dtype or str(V41Config.preset(args.preset).dtype).removeprefix("torch.")
        if dtype != "bfloat16":  # else runtime/grouped_moe.py falls back to gathering a weight per pick
            return f"--moe grouped on CUDA: torch._grouped_mm takes bfloat16 weights, got {dtype} (--dtype, or --moe dense)"
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="tiny", choices=("tiny", "mid", "flash"))
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default=None, help="override the preset's dtype (e.g. bfloat16)")
    p.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 16384])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--chunk", type=int, default=None, help="prefill chunk (default: the whole prompt)")
    p.add_argument("--cut", default="after", choices=("after", "at"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", type=Path, default=None, help="results directory (default benchmarks/results)")
    p.add_argument("--path", default="engine", choices=("engine", "batched"),
                   help="engine: V41Model through the Engine (TTFT); batched: runtime/batched/prefill.py's "
                        "fixed-shape encoder + decoder on [1, N] tokens")
    p.add_argument("--graphs", action="store_true",
                   help="batched path on CUDA: capture each variant's two segments once per length, time replays")
    p.add_argument("--moe", default="grouped", choices=("grouped", "dense"),
                   help="batched path: routed experts grouped (runtime/grouped_moe.py) or dense (the training form)")
    args = p.parse_args(argv)
    problem = _check(args)
    if problem:
        print(f"prefill.py: {problem}", file=sys.stderr)
        return 2
    settings = BenchSettings(args.preset, args.device, args.dtype, tuple(args.lengths), args.repeats,
                             args.chunk, args.cut, args.seed, args.threads, args.path, args.graphs, args.moe)
    command = "python benchmarks/prefill.py " + " ".join(sys.argv[1:] if argv is None else argv)
    out_dir = args.out or RESULTS
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"prefill-{args.preset}-{args.device.split(':')[0]}"
    if args.path == "batched":
        stem += "-batched" + ("-graphs" if args.graphs else "")

    def write(doc: dict) -> None:
        doc["command"] = command
        (out_dir / f"{stem}.json").write_text(json.dumps(doc, indent=2) + "\n")
        (out_dir / f"{stem}.md").write_text(markdown(doc, command))

    doc = run(settings, on_row=write)
    write(doc)
    print(markdown(doc, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
