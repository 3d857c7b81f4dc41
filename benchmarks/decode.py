"""Decode throughput on ``mid``: tokens/s at batch 1, 8, 64, reference vs fused kernels,
and the fraction of the bandwidth roofline (weights + KV read per step / 4.3 TB/s).

Every request is first prefilled to ``--context`` tokens (fused model, once per batch
size); its state is snapshotted, and each variant decodes from fresh copies of the same
snapshots, greedily, ``--steps`` steps after ``--warmup`` (median step time).

CUDA graphs: not measured. The runtime's decode step is not capturable as written
(host-side row bookkeeping, ``.item()`` reads of positions, caches grown by
concatenation), so "graphs on" would need a static-shape decode path first.

    PYTHONPATH=. python benchmarks/decode.py --batches 1 8 64 --context 1024

Writes decode_<gpu>.json/.md (GPU, driver, torch/triton, shapes, command).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch

HBM_BYTES_PER_S = 4.3e12


def step_bytes(config, batch: int, context: int) -> dict:
    """Minimal bytes one decode step must read: every dense weight once, the routed experts
    the batch can touch (min(E, batch*k) of them) once, and each request's KV reads."""
    from runtime.weights import parameter_specs

    c = config
    expert_params = 3 * c.hidden_size * c.moe_intermediate_size
    dense = 0
    for spec in parameter_specs(c):
        if ".ffn.experts." in spec.name or spec.name == "embed.weight" or "engram.embed" in spec.name:
            continue
        dense += math.prod(spec.shape) * (4 if spec.float32 else 2)
    touched = min(c.n_routed_experts, batch * c.num_experts_per_tok)
    experts = c.num_hidden_layers * touched * expert_params * 2
    kv = 0
    for layer in range(c.num_hidden_layers):
        kv += min(context, c.sliding_window) * c.head_dim * 2  # SWA window
        if c.compress_ratios[layer]:
            entries = context // c.compress_ratios[layer]
            kv += min(entries, c.index_topk) * c.head_dim * 2  # selected compressed entries
            if layer in c.index_source_layer_ids:
                kv += entries * c.index_head_dim * 2  # indexer keys scanned
    engram = len(c.engram_layer_ids) * (c.engram_max_ngram_size - 1) * c.engram_n_heads * c.engram_head_dim * 2
    return {"weights": dense + experts, "kv_per_request": kv, "engram_per_request": engram,
            "total": dense + experts + batch * (kv + engram)}


def run(args) -> dict:
    from runtime.config import V41Config
    from runtime.model import SeqChunk, V41Model
    from runtime.options import RuntimeOptions

    config = V41Config.preset(args.preset)
    t0 = time.perf_counter()
    from runtime.weights import V41Weights

    weights = V41Weights.random(config, args.seed, device="cuda", draw_on_device=True)
    torch.cuda.synchronize()
    init_s = time.perf_counter() - t0
    models = {name: V41Model(weights, RuntimeOptions(kernels=name)) for name in args.variants}
    gen = torch.Generator().manual_seed(args.seed)
    rows = []
    for batch in args.batches:
        prompts = [torch.randint(0, config.vocab_size, (args.context,), generator=gen) for _ in range(batch)]
        filler = models[args.variants[-1]]
        snaps = []
        t0 = time.perf_counter()
        for start in range(0, batch, args.prefill_batch):
            states = [filler.new_state() for _ in prompts[start:start + args.prefill_batch]]
            filler.forward([SeqChunk(s, p) for s, p in zip(states, prompts[start:start + args.prefill_batch], strict=True)])
            snaps += [s.export_prefix(args.context) for s in states]
        torch.cuda.synchronize()
        prefill_s = time.perf_counter() - t0
        first = torch.tensor([int(p[-1]) for p in prompts])
        for name in args.variants:
            model = models[name]
            states = [model.new_state(snap) for snap in snaps]
            # The first decode step feeds the prompt's last token again (any token times the same).
            tokens = [first[i : i + 1] for i in range(batch)]
            times, picks = [], []
            for step in range(args.warmup + args.steps):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                outs = model.forward([SeqChunk(s, t, "last") for s, t in zip(states, tokens, strict=True)])
                nxt = torch.stack([o.logits[-1].argmax() for o in outs]).cpu()
                torch.cuda.synchronize()
                if step >= args.warmup:
                    times.append(time.perf_counter() - t0)
                picks.append(nxt)
                tokens = [nxt[i : i + 1] for i in range(batch)]
            step_s = statistics.median(times)
            need = step_bytes(config, batch, args.context)
            roof_tps = batch / (need["total"] / HBM_BYTES_PER_S)
            row = {"batch": batch, "variant": name, "context": args.context, "step_ms": step_s * 1e3,
                   "tokens_per_s": batch / step_s, "roofline_tokens_per_s": roof_tps,
                   "roofline_fraction": (batch / step_s) / roof_tps, "bytes_per_step": need,
                   "prefill_s": prefill_s, "greedy_tokens": torch.stack(picks).tolist()}
            rows.append(row)
            print(f"batch {batch:3d} {name:9s} step {row['step_ms']:8.2f} ms  {row['tokens_per_s']:9.1f} tok/s  "
                  f"roofline {roof_tps:9.0f} tok/s ({row['roofline_fraction']:.2%})", flush=True)
        for i, name in enumerate(args.variants[1:], 1):
            a = [r for r in rows if r["batch"] == batch and r["variant"] == args.variants[0]][0]["greedy_tokens"]
            b = [r for r in rows if r["batch"] == batch and r["variant"] == name][0]["greedy_tokens"]
            same = sum(x == y for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True))
            total = sum(len(ra) for ra in a)
            # Step 0 is the only one with identical inputs; later steps are free-running.
            first = sum(x == y for x, y in zip(a[0], b[0], strict=True))
            print(f"batch {batch:3d} greedy agreement {args.variants[0]} vs {name}: first step {first}/{len(a[0])}, "
                  f"free-running {same}/{total}", flush=True)
            rows[-len(args.variants) + i]["greedy_agreement_vs_first"] = [same, total]
            rows[-len(args.variants) + i]["first_step_agreement_vs_first"] = [first, len(a[0])]
    return {"config": args.preset, "init_s": init_s, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="mid")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--prefill-batch", type=int, default=16)
    parser.add_argument("--variants", nargs="+", default=["reference", "fused"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("benchmarks/decode.py: needs a CUDA GPU", file=sys.stderr)
        return 2
    doc = run(args)
    doc["environment"] = environment()
    doc["command"] = "PYTHONPATH=. python " + " ".join(["benchmarks/decode.py", *(argv or sys.argv[1:])])
    doc["hbm_bytes_per_s"] = HBM_BYTES_PER_S
    doc["cuda_graphs"] = "not measured: the decode step is not capturable as written (see the module docstring)"
    tag = doc["environment"]["gpu"].split()[-1].lower()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"decode_{tag}.json").write_text(json.dumps(doc, indent=2) + "\n")
    text = markdown(doc)
    (args.out / f"decode_{tag}.md").write_text(text)
    print(text)
    return 0


def environment() -> dict:
    import platform
    import subprocess

    import triton

    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    return {"gpu": torch.cuda.get_device_name(0), "nvidia_smi": smi, "torch": torch.__version__,
            "triton": triton.__version__, "cuda": torch.version.cuda, "python": platform.python_version()}


def markdown(doc: dict) -> str:
    env = doc["environment"]
    lines = [
        f"# Decode throughput: `{doc['config']}`, reference vs fused kernels", "",
        f"- GPU: {env['gpu']} ({env['nvidia_smi']}); torch {env['torch']}, triton {env['triton']}, CUDA {env['cuda']}",
        f"- Command: `{doc['command']}`",
        f"- Random bf16 weights (GPU init {doc['init_s']:.1f} s); each request prefilled to the context, then "
        "greedy decode; median step time; roofline = batch / (bytes per step / 4.3 TB/s), bytes = dense "
        "weights + touched experts + per-request KV (window, selected compressed entries, indexer keys).",
        f"- CUDA graphs: {doc['cuda_graphs']}", "",
        "| batch | context | variant | step ms | tokens/s | roofline tokens/s | fraction | first-step agreement | free-running agreement |",
        "|---:|---:|---|---:|---:|---:|---:|---|---|",
    ]
    for r in doc["rows"]:
        agree = r.get("greedy_agreement_vs_first")
        first = r.get("first_step_agreement_vs_first")
        agree_s = f"{agree[0]}/{agree[1]}" if agree else "-"
        first_s = f"{first[0]}/{first[1]}" if first else "-"
        lines.append(f"| {r['batch']} | {r['context']} | {r['variant']} | {r['step_ms']:.2f} | {r['tokens_per_s']:.1f} | "
                     f"{r['roofline_tokens_per_s']:.0f} | {r['roofline_fraction']:.2%} | {first_s} | {agree_s} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
