"""Decode throughput: the engine's step vs the static step vs CUDA graphs, reference vs
fused kernels, as a fraction of the bandwidth roofline.

Variants are (path, kernels, KV storage): path ``engine`` (V41Model.forward over one SeqChunk per
request), ``static`` (runtime.static's fixed-shape step over a preallocated slab) or
``graphs`` (that step replayed from a CUDA graph captured for the batch size), each of the
last two also ``+compile`` (``decode_compile``: the step's small ops through torch.compile,
runtime/static/helpers.py); kernels ``reference``, ``fused`` or a per-op choice
(``all,-linear,-experts``: every fused op but the skinny GEMMs); ``--kv-storage``
``dequantized`` (the slab's window / global KV in the model dtype) and/or ``packed`` (their
FP8 / NVFP4 bytes, decoded in the fused ring attention: ``RuntimeOptions.kv_storage``;
static and graphs paths with fused kernels only, other combinations are skipped). Every
request is prefilled once to ``--context`` tokens and
snapshotted; every variant decodes from its own copies of the same snapshots.

Checks before timing, with identical inputs (the first decode step, same snapshot, same
token): each variant's logits vs the engine/reference logits (max difference relative to
their scale, greedy agreement), graphs vs static bitwise (same kernels), and the static
step run under ``torch.cuda.set_sync_debug_mode("error")`` (a host sync raises).

Timing: ``--rounds`` interleaved rounds (variant order reversed every other round), each
variant ``--steps`` free-running greedy steps per round; median step time over all rounds.
Roofline = batch / (bytes per step / 4.3 TB/s), bytes = dense weights + the routed
experts the batch can touch + per-request KV reads (window, selected compressed entries,
indexer keys scanned), the window and entries counted in the variant's storage: 2 bytes a
value dequantized (bf16), the formats' bytes packed (runtime/kv_bytes.py's per-entry
sizes); the indexer keys stay bf16 in both.

    PYTHONPATH=. python benchmarks/decode.py --batches 1 8 64 --context 1024
    PYTHONPATH=. python benchmarks/decode.py --paths graphs --kernels fused \
        --kv-storage dequantized packed --batches 1 8 64 --context 4096   # packed vs not, interleaved

Writes decode_<gpu>.json/.md (GPU, driver, torch/triton, shapes, command). ``--device cpu``
runs a small smoke version (tiny preset; graphs need CUDA and are skipped).
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

from benchmarks.ceilings import H200_ISSUE
from benchmarks.records import command_line, gpu_tag
from runtime.options import KV_STORAGE  # the switch's own choices

HBM_BYTES_PER_S = H200_ISSUE.copy_bytes_per_s
PATHS = ("engine", "static", "graphs", "static+compile", "graphs+compile")


def runs_packed(path: str, kernels: str) -> bool:
    """Packed storage needs the static slab and the fused ring attention."""
    from runtime.kernels.choice import fused_by_op

    return path != "engine" and fused_by_op(kernels)["attention"]


def kernel_choice(text: str) -> str:
    """A ``--kernels`` entry: "reference", "fused", or a RuntimeOptions.kernels list written
    with commas ("all,-linear,-experts": every fused op but those two)."""
    from runtime.kernels.choice import normalise_choice
    from runtime.kernels.errors import KernelChoiceError

    try:
        normalise_choice(text)
    except KernelChoiceError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def step_bytes(config, batch: int, context: int, kv_storage: str = "dequantized") -> dict:
    """Minimal bytes one decode step must read: every dense weight once, the routed experts
    the batch can touch (min(E, batch*k) of them) once, and each request's KV reads (window
    rows and selected entries in ``kv_storage``'s bytes, indexer keys in bf16)."""
    from runtime.kv_bytes import kv_bytes_per_token
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
    if kv_storage == "packed":
        packed = kv_bytes_per_token(c)  # e4m3 + ue8m0 per 32; e2m1 pairs + e4m3 per 16
        window_row, entry_row = packed.swa_entry_bytes, packed.global_entry_bytes
    else:
        window_row = entry_row = c.head_dim * 2
    kv = 0
    for layer in range(c.num_hidden_layers):
        kv += min(context, c.sliding_window) * window_row  # SWA window
        if c.compress_ratios[layer]:
            entries = context // c.compress_ratios[layer]
            kv += min(entries, c.index_topk) * entry_row  # selected compressed entries
            if layer in c.index_source_layer_ids:
                kv += entries * c.index_head_dim * 2  # indexer keys scanned
    engram = len(c.engram_layer_ids) * (c.engram_max_ngram_size - 1) * c.engram_n_heads * c.engram_head_dim * 2
    return {"weights": dense + experts, "kv_per_request": kv, "engram_per_request": engram,
            "kv_storage": kv_storage, "total": dense + experts + batch * (kv + engram)}


def plan_variants(paths, kernels, storages) -> list[tuple[str, str, str]]:
    """(path, kernels, storage) for every combination that can run (packed: see runs_packed)."""
    return [(p, k, s) for p in paths for k in kernels for s in storages if s != "packed" or runs_packed(p, k)]


def runs_as(row: dict) -> str:
    """The storage a row's step really read: its kernels_used record (a packed variant whose
    fused attention fell back reads dequantized caches)."""
    used = row.get("kernels_used") or {}
    return "packed" if str(used.get("kv_storage", "")).startswith("packed") else "dequantized"


class EngineRunner:
    """The engine's step: one SeqChunk per request through V41Model.forward."""

    def __init__(self, weights, kernels: str, snaps):
        from runtime.model import V41Model
        from runtime.options import RuntimeOptions

        self.model = V41Model(weights, RuntimeOptions(kernels=kernels))
        self.states = [self.model.new_state(s) for s in snaps]

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        from runtime.model import SeqChunk

        outs = self.model.forward([SeqChunk(s, tokens[i : i + 1], "last")
                                   for i, s in enumerate(self.states)])
        return torch.cat([o.logits for o in outs])

    def release(self) -> None:
        self.states = []


class StaticRunner:
    """runtime.static: the slab loaded from the snapshots, the step eager or from a graph."""

    def __init__(self, weights, kernels: str, snaps, max_len: int, graphs: bool, compiled: bool = False,
                 kv_storage: str = "dequantized"):
        from runtime.model import V41Model
        from runtime.options import RuntimeOptions
        from runtime.static.slab import DecodeSlab
        from runtime.static.step import StaticDecodeStep

        options = RuntimeOptions(kernels=kernels, decode="static", decode_compile=compiled, kv_storage=kv_storage)
        loader = V41Model(weights, options)
        c = weights.config
        self.batch = len(snaps)
        storage = kv_storage if loader.ops.is_fused("attention") else "dequantized"  # as StaticDecodeModel
        self.slab = DecodeSlab(c, self.batch, max_len, loader.dtype, loader.device, kv_storage=storage)
        for slot, snap in enumerate(snaps):
            self.slab.load(slot, loader.new_state(snap))
        self.decoder = StaticDecodeStep(weights, options, self.slab)
        self.kernels_used = getattr(self.decoder, "kernels_used", None)
        self.capture_s = None
        self.graphs = None
        t0 = time.perf_counter()
        if compiled:  # compile with one step whose writes are undone
            from runtime.static.graphs import preserved

            with preserved(self.slab):
                self.decoder.step(torch.zeros(self.batch, dtype=torch.int64, device=loader.device))
            self.capture_s = time.perf_counter() - t0
        if graphs:
            from runtime.static.graphs import DecodeGraphs

            self.graphs = DecodeGraphs(self.decoder.step, self.slab, (self.batch,), device=loader.device)
            self.capture_s = time.perf_counter() - t0

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        if self.graphs is None:
            return self.decoder.step(tokens)
        self.slab.reserve(self.batch)
        return self.graphs(tokens)

    def release(self) -> None:
        self.slab = self.decoder = self.graphs = None


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def compare(a: torch.Tensor, b: torch.Tensor) -> dict:
    a, b = a.float().cpu(), b.float().cpu()
    scale = float(b.abs().max())
    return {"max_rel_diff": float((a - b).abs().max()) / scale if scale else 0.0,
            "greedy_agree": int((a.argmax(-1) == b.argmax(-1)).sum()), "rows": a.shape[0],
            "bitwise_equal": bool(torch.equal(a, b))}


def sync_free(runner: StaticRunner, token: torch.Tensor) -> str:
    """Run one eager static step with CUDA's sync debug mode set to raise."""
    if token.device.type != "cuda":
        return "not checked (CPU)"
    torch.cuda.set_sync_debug_mode("error")
    try:
        runner.decoder.step(token)
        torch.cuda.set_sync_debug_mode("default")
        return "no host sync"
    except RuntimeError as exc:
        torch.cuda.set_sync_debug_mode("default")
        return f"SYNCS: {str(exc).splitlines()[0][:120]}"


def prefilled_snaps(weights, batch: int, context: int, prefill_batch: int, gen):
    """``batch`` random prompts of ``context`` tokens, prefilled (fused kernels on CUDA)
    ``prefill_batch`` at a time and snapshotted -> (prompts, snapshots, prefill seconds)."""
    from runtime.model import SeqChunk, V41Model
    from runtime.options import RuntimeOptions

    c = weights.config
    device = weights.embed.weight.device
    prompts = [torch.randint(0, c.vocab_size, (context,), generator=gen) for _ in range(batch)]
    filler = V41Model(weights, RuntimeOptions(kernels="fused" if device.type == "cuda" else "reference"))
    snaps = []
    t0 = time.perf_counter()
    for start in range(0, batch, prefill_batch):
        chunk = prompts[start:start + prefill_batch]
        states = [filler.new_state() for _ in chunk]
        filler.forward([SeqChunk(s, p.to(device)) for s, p in zip(states, chunk, strict=True)])
        snaps += [s.export_prefix(context) for s in states]
    sync(device)
    return prompts, snaps, time.perf_counter() - t0


def slab_len(config, context: int, steps: int) -> int:
    """Slab positions per slot for ``context`` prefilled tokens and ``steps`` decode steps
    (and a few spare), rounded up to the largest KV-source compress ratio."""
    c = config
    ratio = max([c.compress_ratios[s] for s in c.kv_source_layer_ids] or [1])
    return -(-(context + steps + 10) // ratio) * ratio


def run_batch(args, weights, batch: int, variants: list[tuple[str, str, str]], gen) -> list[dict]:
    c = weights.config
    device = weights.embed.weight.device
    prompts, snaps, prefill_s = prefilled_snaps(weights, batch, args.context, args.prefill_batch, gen)
    max_len = slab_len(c, args.context, args.rounds * args.steps + 1)

    runners = {}
    for path, kernels, storage in variants:
        if path == "engine":
            runners[(path, kernels, storage)] = EngineRunner(weights, kernels, snaps)
        else:
            runners[(path, kernels, storage)] = StaticRunner(
                weights, kernels, snaps, max_len, graphs=path.startswith("graphs"),
                compiled=path.endswith("+compile"), kv_storage=storage)
    first = torch.tensor([int(p[-1]) for p in prompts], device=device)
    # The first decode step feeds the prompt's last token again (any token works, the same for all).
    logits0 = {key: r(first).clone() for key, r in runners.items()}
    sync(device)
    base_key = variants[0]
    rows = {}
    for key, r in runners.items():
        path, kernels, storage = key
        row = {"batch": batch, "context": args.context, "path": path, "kernels": kernels, "kv_storage": storage,
               "prefill_s": prefill_s, "vs_first_variant": compare(logits0[key], logits0[base_key])}
        eager_twin = (path.replace("graphs", "static"), kernels, storage)
        if path.startswith("graphs") and eager_twin in logits0:
            row["graphs_vs_static_bitwise"] = bool(torch.equal(logits0[key], logits0[eager_twin]))
        dequantized_twin = (path, kernels, "dequantized")
        if storage == "packed" and dequantized_twin in logits0:  # same values: the same logits bit for bit
            row["packed_vs_dequantized_bitwise"] = bool(torch.equal(logits0[key], logits0[dequantized_twin]))
        if path != "engine":
            row["capture_s"] = r.capture_s
            row["kernels_used"] = r.kernels_used
        if path.startswith("static"):
            row["host_syncs"] = sync_free(r, first)
        rows[key] = row

    tokens = {key: logits0[key].argmax(-1) for key in runners}
    times = {key: [] for key in runners}
    for rnd in range(args.rounds):
        order = list(runners) if rnd % 2 == 0 else list(reversed(runners))
        for key in order:
            r = runners[key]
            for _ in range(args.steps):
                sync(device)
                t0 = time.perf_counter()
                out = r(tokens[key])
                nxt = out.argmax(-1)
                sync(device)
                times[key].append(time.perf_counter() - t0)
                tokens[key] = nxt
    out_rows = []
    for key, row in rows.items():
        bytes_needed = step_bytes(c, batch, args.context, runs_as(row))
        roof = batch / (bytes_needed["total"] / HBM_BYTES_PER_S)
        step_s = statistics.median(times[key])
        row.update({"step_ms": step_s * 1e3, "tokens_per_s": batch / step_s, "roofline_tokens_per_s": roof,
                    "roofline_fraction": batch / step_s / roof, "bytes_per_step": bytes_needed,
                    "step_ms_all": [t * 1e3 for t in times[key]]})
        out_rows.append(row)
        cmp = row["vs_first_variant"]
        print(f"batch {batch:3d} {key[0]:6s} {key[1]:9s} {key[2]:11s} step {row['step_ms']:8.2f} ms "
              f"{row['tokens_per_s']:9.1f} tok/s ({row['roofline_fraction']:.2%} of roofline) "
              f"rel diff {cmp['max_rel_diff']:.2e} greedy {cmp['greedy_agree']}/{cmp['rows']} "
              f"{row.get('host_syncs', '')}", flush=True)
    for r in runners.values():
        r.release()
    return out_rows


def run(args) -> dict:
    from runtime.config import V41Config
    from runtime.weights import V41Weights

    device = torch.device(args.device)
    config = V41Config.preset(args.preset)
    t0 = time.perf_counter()
    weights = V41Weights.random(config, args.seed, device=device, draw_on_device=device.type == "cuda",
                                dtype=torch.bfloat16 if device.type == "cuda" else torch.float32)
    sync(device)
    init_s = time.perf_counter() - t0
    paths = [p for p in args.paths if not p.startswith("graphs") or device.type == "cuda"]
    variants = plan_variants(paths, args.kernels, args.kv_storage)
    gen = torch.Generator().manual_seed(args.seed)
    rows = []
    for batch in args.batches:
        rows += run_batch(args, weights, batch, variants, gen)
    return {"config": args.preset, "init_s": init_s, "rows": rows, "variants": variants}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="mid")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=4, help="steps per variant per round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--prefill-batch", type=int, default=16)
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=PATHS)
    parser.add_argument("--kernels", nargs="+", default=["reference", "fused"], type=kernel_choice,
                        help="kernel choices to compare: reference, fused, or a comma list such as "
                             "all,-linear,-experts (RuntimeOptions.kernels)")
    parser.add_argument("--kv-storage", nargs="+", default=["dequantized"], choices=KV_STORAGE,
                        help="the static slab's window / global KV: model dtype and/or packed bytes "
                             "(packed runs on static/graphs paths with fused kernels only)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    if "packed" in args.kv_storage and not plan_variants(args.paths, args.kernels, ["packed"]):
        print("decode.py: --kv-storage packed: needs a static or graphs path in --paths and fused in --kernels",
              file=sys.stderr)
        return 2
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("benchmarks/decode.py: --device cuda needs a CUDA GPU (use --device cpu --preset tiny)",
              file=sys.stderr)
        return 2
    doc = run(args)
    doc["environment"] = environment(torch.device(args.device))
    doc["command"] = command_line("benchmarks/decode.py", argv or sys.argv[1:])
    doc["hbm_bytes_per_s"] = HBM_BYTES_PER_S
    tag = gpu_tag(doc["environment"]["gpu"]) if args.device.startswith("cuda") else "cpu"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"decode_{tag}.json").write_text(json.dumps(doc, indent=2) + "\n")
    text = markdown(doc)
    (args.out / f"decode_{tag}.md").write_text(text)
    print(text)
    return 0


def environment(device: torch.device) -> dict:
    import platform
    import subprocess

    env = {"torch": torch.__version__, "python": platform.python_version(), "gpu": "cpu", "nvidia_smi": "-",
           "cuda": torch.version.cuda, "triton": None}
    if device.type == "cuda":
        import triton

        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip()
        env.update(gpu=torch.cuda.get_device_name(0), nvidia_smi=smi, triton=triton.__version__)
    return env


def yes_no(flag: bool | None) -> str:
    return "-" if flag is None else ("yes" if flag else "NO")


def markdown(doc: dict) -> str:
    env = doc["environment"]
    lines = [
        f"# Decode throughput: `{doc['config']}`, engine vs static step vs CUDA graphs, reference vs fused", "",
        f"- GPU: {env['gpu']} ({env['nvidia_smi']}); torch {env['torch']}, triton {env['triton']}, CUDA {env['cuda']}",
        f"- Command: `{doc['command']}`",
        f"- Random weights (init {doc['init_s']:.1f} s); each request prefilled to the context once, every "
        "variant decodes from copies of the same snapshots; median step time over interleaved rounds "
        "(order reversed every other round); roofline = batch / (bytes per step / 4.3 TB/s), bytes = dense "
        "weights + touched experts + per-request KV (window, selected compressed entries, indexer keys; "
        "window and entries in the row's KV storage: bf16, or the packed FP8 / NVFP4 bytes).",
        "- `rel diff` / `greedy`: first decode step with identical inputs, logits vs the first variant "
        "(max |diff| / max |logit|; rows whose argmax agrees). `graphs = static`: bitwise equal logits "
        "to the eager static step with the same compile setting. `packed = deq.`: bitwise equal logits to the "
        "same variant over dequantized caches. `+compile`: decode_compile "
        "(runtime/static/helpers.py); capture s includes compiling.", "",
        "| batch | context | path | kernels | KV storage | step ms | tokens/s | roofline tokens/s | fraction "
        "| rel diff | greedy | graphs = static | packed = deq. | host syncs |",
        "|---:|---:|---|---|---|---:|---:|---:|---:|---:|---|---|---|---|",
    ]
    for r in doc["rows"]:
        cmp = r["vs_first_variant"]
        bit, same = r.get("graphs_vs_static_bitwise"), r.get("packed_vs_dequantized_bitwise")
        storage = r.get("kv_storage", "dequantized")
        if storage != r.get("bytes_per_step", {}).get("kv_storage", storage):
            storage += " (NOT packed: fused attention did not run)"
        lines.append(
            f"| {r['batch']} | {r['context']} | {r['path']} | {r['kernels']} | {storage} | {r['step_ms']:.2f} | "
            f"{r['tokens_per_s']:.1f} | {r['roofline_tokens_per_s']:.0f} | {r['roofline_fraction']:.2%} | "
            f"{cmp['max_rel_diff']:.2e} | {cmp['greedy_agree']}/{cmp['rows']} | "
            f"{yes_no(bit)} | {yes_no(same)} | {r.get('host_syncs', '-')} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
