"""Ops per static decode step: which aten ops one ``StaticDecodeStep.step`` dispatches, by
name, in total and per layer, from torch.profiler.

Why: on the H200 a replayed ``mid`` decode step at batch 1 is bound by its kernel count
(~3,150 kernels per eager step, benchmarks/results/decode_h200.md), not by bytes. Cutting
ops is CPU work, but the GPU is not here: this counts what the step dispatches on the CPU,
which is the proxy the GPU kernel count follows (every op that does work on a CUDA tensor
launches about one kernel; views, allocations and no-op casts launch none).

Counted per step (one step after a warm-up step, both with the same slab state):
- ``work ops``: the aten ops Python calls (no aten op above them) that compute, or copy
  (a view or cast op with a computing op below it: a real cast, a reshape that copies);
  views, allocations and no-op casts (``NO_WORK``) are not counted, nor what an op runs
  inside itself (the CPU's internal casts and loops, e.g. the grouped GEMM's per-expert
  mm; on CUDA it is one kernel); registry ops run as their reference code;
- ``fused view``: the same, each registry-op call (mhc, gate, topk, ...) counted as one op,
  as its fused kernel would be: the kernel proxy of ``--kernels fused``;
- ``top-level ops``: every aten op called from Python, views included;
- per layer: the work ops inside each layer's body (``StaticDecodeStep._layer``), the rest
  (embedding, tables, head) as ``outside layers``.
On ``--device cuda`` it also counts the CUDA kernels the profiler saw.

Configs: ``tiny`` (float32, as the tests run it); ``mid-narrow``: ``mid``'s structure (24
layers, ratios, KV / index sources, heads, experts, top-k, groups) with narrow widths, in
bf16, so the op sequence is ``mid``'s (no op count depends on a width) on a small CPU;
``mid`` itself (about 10 GB of bf16 weights, a CPU draw of about a minute).

    PYTHONPATH=. python benchmarks/step_ops.py --presets tiny mid-narrow --batches 1 8 64

``--kernels fused`` needs CUDA (the Triton interpreter runs a kernel as many numpy/torch
ops, which would count the interpreter, not the kernel). Writes step_ops_<device>.json/.md.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import torch

from benchmarks.records import command_line, write

# Ops that launch no kernel themselves: views, metadata, allocations, and casts / copies
# that can be no-ops (a ``to`` or ``contiguous`` counts only if an op below it computes:
# a real cast shows its _to_copy / copy_ child).
NO_WORK = frozenset(f"aten::{n}" for n in (
    "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "expand", "expand_as", "t",
    "transpose", "permute", "unsqueeze", "squeeze", "slice", "select", "narrow", "alias", "detach",
    "unbind", "split", "split_with_sizes", "chunk", "flatten", "unflatten", "view_as", "empty",
    "empty_like", "empty_strided", "resolve_conj", "resolve_neg", "to", "contiguous", "lift_fresh",
    "result_type", "movedim", "unfold", "diagonal", "broadcast_tensors", "new_empty", "type_as",
    "numpy_T", "is_nonzero", "_has_compatible_shallow_copy_type", "size", "stride", "dim", "resize_",
    "scalar_tensor",
))
PRESETS = ("tiny", "mid-narrow", "mid")


def config_for(name: str):
    """The V41Config of ``name`` (see the module docstring for mid-narrow)."""
    from runtime.config import V41Config

    if name != "mid-narrow":
        return V41Config.preset(name)
    return V41Config.preset("mid").replace(
        vocab_size=1024, hidden_size=256, head_dim=64, qk_rope_head_dim=16, q_lora_rank=64, o_lora_rank=64,
        moe_intermediate_size=64, index_head_dim=32, engram_vocab_size=1000, engram_compressed_vocab_size=1024,
        engram_head_dim=32)


def build_step(preset: str, batch: int, max_len: int, kernels: str, invariant: bool, device: torch.device,
               seed: int = 0):
    """A StaticDecodeStep over an empty slab of ``batch`` slots (every slot at position 0:
    the step's shapes, and so its ops, do not depend on the positions)."""
    from runtime.options import RuntimeOptions
    from runtime.static import DecodeSlab, StaticDecodeStep
    from runtime.weights import V41Weights

    c = config_for(preset)
    dtype = getattr(torch, c.torch_dtype)
    weights = V41Weights.random(c, seed, dtype=dtype, device=device, draw_on_device=device.type == "cuda")
    options = RuntimeOptions(kernels=kernels, batch_invariant=invariant, decode="static")
    group = max([c.compress_ratios[s] for s in c.kv_source_layer_ids] or [1])
    slab = DecodeSlab(c, batch, -(-max_len // group) * group, dtype, device)
    return StaticDecodeStep(weights, options, slab)


def count_step(step, batch: int) -> dict:
    """Profile one step (after a warm-up step from the same slab state) -> counts."""
    from runtime.static.graphs import preserved

    device = step.device
    tokens = torch.zeros(batch, dtype=torch.int64, device=device)
    with preserved(step.slab):
        step.step(tokens)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
        torch.cuda.synchronize(device)
    with preserved(step.slab), traced_step(step), torch.profiler.profile(activities=activities) as prof:
        step.step(tokens)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return tally(prof.events(), step.config.num_hidden_layers)


@contextmanager
def traced_step(step):
    """Within: each layer of ``step`` runs in a profiler range "layer N" and each registry-op
    call in "registry NAME" (the step's own rope_quant handle too); restored on exit."""
    layer_fn = step._layer

    def traced(layer, *args):
        with torch.profiler.record_function(f"layer {layer}"):
            return layer_fn(layer, *args)

    impls = dict(step.ops._impls)
    ranged = {name: _ranged(f"registry {name}", fn) for name, fn in impls.items()}
    quant = getattr(step, "quant", None)  # the step's own handle on the registry's rope_quant
    step._layer = traced
    step.ops._impls.update(ranged)
    if quant is impls["rope_quant"]:
        step.quant = ranged["rope_quant"]
    try:
        yield step
    finally:
        del step._layer
        step.ops._impls.update(impls)
        if quant is not None:
            step.quant = quant


class _ranged:
    """``fn`` called inside a profiler range ``label`` (a registry op, for the fused view)."""

    def __init__(self, label: str, fn):
        self.label, self.fn = label, fn

    def __call__(self, *args, **kwargs):
        with torch.profiler.record_function(self.label):
            return self.fn(*args, **kwargs)

    def __getattr__(self, name):  # attributes of the op object (e.g. engram's check_ids)
        return getattr(self.fn, name)


def _where(ev) -> tuple[str | None, str | None, bool]:
    """(layer range, registry op range, whether an aten op is above) of an event."""
    layer = registry = None
    above_is_aten = False
    parent = ev.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            above_is_aten = True
        elif parent.name.startswith("layer ") and layer is None:
            layer = parent.name
        elif parent.name.startswith("registry ") and registry is None:
            registry = parent.name.split()[1]
        parent = parent.cpu_parent
    return layer or "outside layers", registry, above_is_aten


def _does_work(ev) -> bool:
    """An op that computes, or a view / cast op that copies (some op below it computes)."""
    return ev.name not in NO_WORK or any(ch.name.startswith("aten::") and _does_work(ch) for ch in ev.cpu_children)


def tally(events, n_layers: int) -> dict:
    """Work ops (by name and per layer), the fused view (each registry-op call one op,
    the work ops outside registry ops as they are), top-level ops, CUDA kernels."""
    work, top, outside, calls = Counter(), Counter(), Counter(), Counter()
    per_layer, fused_layer = Counter(), Counter()
    kernels = 0
    for ev in events:
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            kernels += 1
            continue
        if ev.name.startswith("registry "):
            layer, registry, _ = _where(ev)
            if registry is None:  # not nested in another registry op
                calls[ev.name.split()[1]] += 1
                fused_layer[layer] += 1
            continue
        if not ev.name.startswith("aten::"):
            continue
        layer, registry, above_is_aten = _where(ev)
        if above_is_aten:
            continue
        top[ev.name] += 1
        if _does_work(ev):
            work[ev.name] += 1
            per_layer[layer] += 1
            if registry is None:
                outside[ev.name] += 1
                fused_layer[layer] += 1
    names = [f"layer {i}" for i in range(n_layers)] + ["outside layers"]
    return {"work_ops": sum(work.values()), "fused_view_ops": sum(outside.values()) + sum(calls.values()),
            "top_level_ops": sum(top.values()), "cuda_kernels": kernels or None,
            "registry_calls": dict(calls.most_common()), "outside_registry_by_name": dict(outside.most_common()),
            "work_by_name": dict(work.most_common()), "top_by_name": dict(top.most_common()),
            "per_layer": {k: per_layer.get(k, 0) for k in names},
            "fused_view_per_layer": {k: fused_layer.get(k, 0) for k in names}}


def run(args) -> dict:
    device = torch.device(args.device)
    rows = []
    for preset in args.presets:
        for batch in args.batches:
            step = build_step(preset, batch, args.max_len, args.kernels, args.batch_invariant, device, args.seed)
            counts = count_step(step, batch)
            rows.append({"preset": preset, "batch": batch, "kernels": args.kernels,
                         "batch_invariant": args.batch_invariant, "max_len": step.slab.max_len, **counts})
            print(f"{preset:10s} batch {batch:3d}: {counts['work_ops']:5d} work ops, "
                  f"{counts['fused_view_ops']:5d} fused view, {counts['top_level_ops']:5d} top-level"
                  + (f", {counts['cuda_kernels']} CUDA kernels" if counts["cuda_kernels"] else ""), flush=True)
            del step
    return {"device": args.device, "torch": torch.__version__, "rows": rows}


def _spread(per_layer: dict) -> str:
    counts = [v for k, v in per_layer.items() if k.startswith("layer ")]
    return f"{min(counts)}-{max(counts)}"


def markdown(doc: dict, top_names: int) -> str:
    lines = [
        f"# Ops per static decode step ({doc['device']}, torch {doc['torch']})", "",
        f"- Command: `{doc['command']}`",
        "- `work ops`: the aten ops one `StaticDecodeStep.step` calls from Python that compute or copy "
        "(views, allocations and no-op casts, `NO_WORK` in benchmarks/step_ops.py, not counted; nor what "
        "an op runs inside itself on the CPU), registry ops run as their reference code. "
        "`fused view`: the same, but every registry-op call (mhc, gate, topk, inv_rope, compress, "
        "rope_quant, engram) counted as one op, as its fused kernel would be. Both are CPU proxies of "
        "the GPU kernel count: on CUDA a work op launches about one kernel; a fused op may launch more "
        "than one (split reductions), and decode_compile's fusion is not modelled.",
        "- `top-level`: aten ops called from Python, views included.", "",
        "| preset | batch | kernels | invariant | max_len | work ops | fused view | top-level | CUDA kernels "
        "| fused view outside layers | fused view per layer (min-max) |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in doc["rows"]:
        lines.append(
            f"| {r['preset']} | {r['batch']} | {r['kernels']} | {'yes' if r['batch_invariant'] else 'no'} | "
            f"{r['max_len']} | {r['work_ops']} | {r['fused_view_ops']} | {r['top_level_ops']} | "
            f"{r['cuda_kernels'] or '-'} | {r['fused_view_per_layer']['outside layers']} | "
            f"{_spread(r['fused_view_per_layer'])} |")
    for r in doc["rows"]:
        lines += ["", f"## {r['preset']}, batch {r['batch']}", "",
                  "Registry-op calls: " + ", ".join(f"{k} {v}" for k, v in r["registry_calls"].items()), "",
                  f"Work ops outside registry ops, by name (top {top_names}):", "",
                  "| op | count |", "|---|---:|"]
        lines += [f"| `{name}` | {n} |" for name, n in list(r["outside_registry_by_name"].items())[:top_names]]
        lines += ["", "Fused view per layer: " + ", ".join(
            f"{k.replace('layer ', 'L')} {v}" for k, v in r["fused_view_per_layer"].items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", nargs="+", default=["tiny", "mid-narrow"], choices=PRESETS)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--max-len", type=int, default=1088, help="slab positions per slot")
    parser.add_argument("--kernels", default="reference", choices=["reference", "fused"])
    parser.add_argument("--batch-invariant", action="store_true")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--top", type=int, default=25, help="op names listed per row in the MD")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="folder for step_ops_<device>.json/.md")
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("benchmarks/step_ops.py: --device cuda needs a CUDA GPU", file=sys.stderr)
        return 2
    if args.kernels == "fused" and not args.device.startswith("cuda"):
        print("benchmarks/step_ops.py: --kernels fused needs --device cuda (the Triton interpreter "
              "would count its own ops, not kernels)", file=sys.stderr)
        return 2
    if any(b < 1 for b in args.batches) or args.max_len < 2:
        print("benchmarks/step_ops.py: --batches and --max-len must be positive (max-len >= 2)", file=sys.stderr)
        return 2
    doc = run(args)
    doc["command"] = command_line("benchmarks/step_ops.py", argv or sys.argv[1:])
    text = markdown(doc, args.top)
    if args.out is None:
        print(text)
    else:
        write(args.out, f"step_ops_{'cpu' if args.device == 'cpu' else 'cuda'}", doc, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
