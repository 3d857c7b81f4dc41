"""A forward at the released Flash dimensions with Engram on, on one H200 (issue 16): exact
SWA mode after a prefix-cache hit equals a cold prefill.

What runs: the ``flash`` config cut to ``FLASH_LAYERS`` (``runtime/layer_subset.py``;
every other dimension as released: hidden 5120, 64 heads x 512, 384 routed experts top-6
of 2304, indexer 32 x 128 top-512, 2048 candidate blocks, mHC 4 streams, vocabulary
129,280 with Engram's 99,092 compressed ids), random bf16 weights drawn on the device.
Flash layers 1, 14, 20 and 24 become layers 0-3 in their flash roles: 1 window only +
Engram, 14 ratio-2 KV source (full index) + Engram, 20 ratio-1 KV source and candidate
source, 24 ratio-1 re-indexing inside 20's candidate blocks. That is every compress
ratio, both Engram layers and every index mode but "reuse" (a layer reading a source's
published top-k without its own indexer; covered at ``tiny`` and ``mid``), in 4 layers,
which is all that fits:

Memory (parameter_specs of the reduced config, bf16, mHC/sinks/gate bias in float32):
    routed experts  384 x 3 x 2304 x 5120 x 2 B = 27.18 GB (25.31 GiB) per layer, 4 layers: 101.25 GiB
    attention, mHC, gate, shared expert, Engram projections:                           1.87 GiB
    embedding + head 2 x 129280 x 5120 x 2 B:                                           2.47 GiB
    Engram tables (engram_vocab_size 350,000: 8,404,462 + 8,413,084 rows x 256 x 2 B):   8.02 GiB
    weights                                                                            113.6 GiB
    + drawing the largest tensor (one table, float32, 8.0 GiB) while snapping it in
      1M-row blocks (runtime/weights.py, copy_fp8_snapped), then the prefill's activations
      (estimated, not yet measured: about 1 GiB at 3k tokens, the largest being the float32
      attention output [T, 64, 512] and mHC input [T, 20480]), on a 139 GiB H200; the weights
      plus HEADROOM_BYTES (8 GiB) must be free before anything is built. A fifth layer
      (+25.6 GiB) would need 139.2 GiB for the weights alone.
The released tables (384,006,168 and 384,016,682 rows x 256, 196.7 GB in bf16) fit neither
the GPU nor the 128 GiB host, so only their row count shrinks (the bucket primes start at
350,000 instead of 16,000,000): head dim, 8 heads, n-grams 2..4, pad id and the compressed
vocabulary stay, and each table keeps more than 2^31 values, so row offsets need int64 as
at the release. Weights are drawn on the device (the host never holds them). The
compressed-token map is the release rule applied to a case-folding stand-in tokenizer of
the released sizes (``runtime/engram_map.py``, ``case_fold_token_map``): there is no
release tokenizer for random weights.

The check, per (kernels, numerics) variant, all through the runtime's engine
(``runtime/engine``) over one model, greedy, ``--steps`` tokens with their logits:
    one-shot cold:  B = P + S2 in one prefill chunk, prefix cache off;
    chunked cold:   B in ``--chunk``-token chunks (cache on, empty);
    warm:           A = P + S1 (the cache stores a snapshot at every chunk end), then B: a
                    hit of |P| tokens (the model's counters say how many), the rest fed.
Warm and chunked cold run the same math (the prefix came from an identical chunk of A),
so they must be equal bit for bit in every variant. Warm against one-shot cold differ in
GEMM row counts, and the prefix rows were scored by the indexer against fewer entries
(one chunk's worth, not all of B's); the runtime promises bit-exactness across both on its
batch-invariant path (``RuntimeOptions(batch_invariant=True)``: fixed-tile GEMMs, padded
key axes; runtime/numerics.py), so the verdict requires it for the reference kernels in
``invariant`` numerics. (On the CPU that holds at these dimensions; on the GPU it rests on
cuBLAS giving a row the same float32 index scores whatever the padded entry count, which
this run is the first to test.) The fused kernels and the ``fast`` numerics make no such
promise: their one-shot difference is reported (max |diff| / max(1, max |logit|) over
all steps, and whether the greedy tokens agree), not judged. A variant that raises is
recorded with its error and fails the verdict; the others still run, and the files are
rewritten after every variant. Exit 0 when every required check holds, 1 when one fails,
2 on bad flags.

    PYTHONPATH=. python benchmarks/flash_forward.py --out benchmarks/results

writes ``flash_forward_<gpu>.json`` and ``.md`` (memory, times, hit tokens, every
comparison). ``--device cpu --experts 8`` runs the same code on a CPU at the flash
dimensions with 8 routed experts (a shape check; not a flash forward).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from benchmarks.records import gpu_tag

RESULTS = Path(__file__).resolve().parent / "results"
FLASH_LAYERS = (1, 14, 20, 24)
ENGRAM_VOCAB = 350_000  # bucket primes' base: tables of 8.4M rows (> 2^31 values each)
GIB = 2**30
HEADROOM_BYTES = 8 * GIB  # the float32 draw of one table, then the prefill's activations
VARIANTS_KERNELS = ("reference", "fused")
NUMERICS = ("invariant", "fast")


@dataclass(frozen=True)
class FlashForward:
    """One run's settings (the flags)."""

    layers: tuple[int, ...] = FLASH_LAYERS
    engram_vocab_size: int = ENGRAM_VOCAB
    prefix: int = 2048
    suffix: int = 1024
    chunk: int = 512
    steps: int = 4
    kernels: tuple[str, ...] = VARIANTS_KERNELS
    numerics: tuple[str, ...] = NUMERICS
    seed: int = 0
    device: str = "cuda"
    experts: int | None = None  # fewer routed experts: a CPU shape check, not a flash forward

    def config(self):
        """The flash config cut to ``layers`` (runtime/layer_subset.py)."""
        from runtime.layer_subset import LayerSubset
        from runtime.presets import flash_config

        config = LayerSubset(self.layers, self.engram_vocab_size).apply(flash_config())
        if self.experts is not None:
            config = config.replace(n_routed_experts=self.experts,
                                    num_experts_per_tok=min(config.num_experts_per_tok, self.experts))
        return config


def problem(s: FlashForward) -> str | None:
    """The one-line problem with the settings, or None."""
    from runtime.devices import check_device
    from runtime.errors import ConfigError

    for name in ("prefix", "suffix", "chunk", "steps"):
        if getattr(s, name) < 1:
            return f"--{name}: expected >= 1, got {getattr(s, name)}"
    if s.prefix % s.chunk:
        return (f"--prefix: {s.prefix} is not a multiple of --chunk {s.chunk} (the prefix cache "
                "keeps snapshots at chunk ends, so the hit would stop short of the prefix)")
    if s.experts is not None and s.experts < 1:
        return f"--experts: expected >= 1, got {s.experts}"
    from runtime.presets import flash_config

    engram = flash_config().engram_layer_ids
    if not set(s.layers) & set(engram):
        return (f"--layers: {','.join(map(str, s.layers))} keeps no Engram layer (flash: "
                f"{', '.join(map(str, engram))}); this is the forward with Engram on")
    try:
        config = s.config()
    except ConfigError as exc:  # names the field: layers or engram_vocab_size, i.e. the flag
        field, _, rest = str(exc).partition(":")
        return f"--{field.replace('_', '-')}:{rest}"
    try:
        check_device(s.device, "--device")
    except ConfigError as exc:
        return str(exc)
    if s.device.startswith("cuda"):
        need, free = weight_bytes(config)["total"], torch.cuda.mem_get_info(torch.device(s.device))[0]
        if need + HEADROOM_BYTES > free:
            return (f"--layers: the weights need {need / GIB:.1f} GiB + {HEADROOM_BYTES / GIB:.0f} GiB headroom, "
                    f"{s.device} has {free / GIB:.1f} GiB free (keep fewer layers or lower --engram-vocab-size)")
    return None


def weight_bytes(config, dtype: torch.dtype = torch.bfloat16) -> dict[str, int]:
    """Bytes of every tensor V41Weights allocates, by group (no allocation)."""
    from runtime.weights import parameter_specs

    size = torch.tensor([], dtype=dtype).element_size()
    groups = {"routed_experts": 0, "engram_tables": 0, "embed_head": 0, "other": 0}
    for spec in parameter_specs(config):
        n = math.prod(spec.shape) * (4 if spec.float32 else size)
        if ".ffn.experts." in spec.name:
            groups["routed_experts"] += n
        elif spec.name.endswith("engram.embed.weight"):
            groups["engram_tables"] += n
        elif spec.name in ("embed.weight", "head.weight"):
            groups["embed_head"] += n
        else:
            groups["other"] += n
    groups["total"] = sum(groups.values())
    return groups


def prompts(s: FlashForward, vocab: int) -> tuple[list[int], list[int]]:
    """A = P + S1 and B = P + S2, with S1 and S2 different from their first token on (so
    the longest prefix B shares with A is exactly P)."""
    gen = torch.Generator().manual_seed(s.seed)
    p, s1, s2 = (torch.randint(3, vocab, (n,), generator=gen).tolist() for n in (s.prefix, s.suffix, s.suffix))
    if s2[0] == s1[0]:
        s2[0] = 3 + (s1[0] - 2) % (vocab - 3)
    return p + s1, p + s2


def compare(a, b) -> dict:
    """``a`` against ``b`` (GenerateResults): bitwise, max |diff| / max(1, max |b|), tokens."""
    la, lb = a.logits, b.logits
    rel = float(((la - lb).abs().amax(-1) / lb.abs().amax(-1).clamp_min(1.0)).max())
    return {"bitwise": bool(torch.equal(la, lb)), "max_rel_diff": rel,
            "tokens_equal": a.token_ids == b.token_ids}


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _generate(engine, prompt: list[int], steps: int, device: str):
    from runtime.engine.requests import GenerateRequest

    _sync(device)
    t0 = time.perf_counter()
    result = engine.generate_one(GenerateRequest(prompt_ids=tuple(prompt), max_tokens=steps,
                                                 ignore_eos=True, return_logits=True))
    _sync(device)
    return result, {"total_s": time.perf_counter() - t0, "ttft_s": result.timings.ttft_s}


def run_variant(weights, kernels: str, numerics: str, s: FlashForward, a: list[int], b: list[int]) -> dict:
    """The three runs of B (one-shot cold, chunked cold, warm after A) on one model."""
    from runtime.engine.engine import Engine, EngineConfig
    from runtime.model import V41Model
    from runtime.options import RuntimeOptions

    model = V41Model(weights, RuntimeOptions(swa="exact", kernels=kernels,
                                             batch_invariant=numerics == "invariant"))
    row = {"kernels": kernels, "numerics": numerics, "ops": model.ops.describe()}
    if kernels == "fused" and "reference" in model.ops.selected.values():
        row["skipped"] = f"fused kernels cannot run here ({model.ops.backend.reason or 'some ops fell back'})"
        return row
    if s.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    one_shot = EngineConfig(prefill_chunk_tokens=len(b), max_batch_requests=1, prefix_cache_entries=0)
    chunked = EngineConfig(prefill_chunk_tokens=s.chunk, prefix_block_tokens=s.chunk, max_batch_requests=1,
                           prefix_cache_entries=2 * (len(a) // s.chunk + 1))
    _generate(Engine(model, config=chunked), b[: s.chunk + 1], 1, s.device)  # warm-up (Triton compiles)
    cold, row["cold_one_shot"] = _generate(Engine(model, config=one_shot), b, s.steps, s.device)
    cold_chunked, row["cold_chunked"] = _generate(Engine(model, config=chunked), b, s.steps, s.device)
    engine = Engine(model, config=chunked)
    _, row["prime_a"] = _generate(engine, a, s.steps, s.device)
    before = model.counters.snapshot()
    warm, row["warm"] = _generate(engine, b, s.steps, s.device)
    counted = model.counters.since(before)
    row.update(hit_tokens_counted=counted["hit_tokens"], prefix_hits_counted=counted["prefix_hits"],
               hit_tokens_request=warm.timings.prefix_hit_tokens, fed_tokens_warm=warm.timings.prefill_tokens_fed,
               warm_vs_cold_chunked=compare(warm, cold_chunked), warm_vs_cold_one_shot=compare(warm, cold),
               greedy_tokens=list(warm.token_ids))
    if s.device.startswith("cuda"):
        row["peak_allocated_gib"] = torch.cuda.max_memory_allocated() / GIB
    row["checks"] = checks(row, s)
    return row


def checks(row: dict, s: FlashForward) -> dict[str, bool]:
    """The required checks of one variant (the module doc says which and why)."""
    out = {"hit_is_the_prefix": row["hit_tokens_counted"] == s.prefix == row["hit_tokens_request"]
           and row["prefix_hits_counted"] == 1,
           "warm_equals_chunked_cold_bitwise": row["warm_vs_cold_chunked"]["bitwise"]
           and row["warm_vs_cold_chunked"]["tokens_equal"]}
    if row["kernels"] == "reference" and row["numerics"] == "invariant":
        cmp = row["warm_vs_cold_one_shot"]
        out["warm_equals_one_shot_cold_bitwise"] = cmp["bitwise"] and cmp["tokens_equal"]
    return out


def build_weights(s: FlashForward, config):
    """Random bf16 weights on ``s.device`` (drawn there) with the stand-in token map."""
    from runtime.engram_map import case_fold_token_map
    from runtime.weights import V41Weights

    t0 = time.perf_counter()
    weights = V41Weights.random(config, s.seed, dtype=torch.bfloat16, device=s.device, draw_on_device=True)
    _sync(s.device)
    init_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    weights.engram_token_map = case_fold_token_map(config)
    return weights, {"weights_init_s": init_s, "token_map_s": time.perf_counter() - t0}


def run(s: FlashForward, on_variant=None) -> dict:
    """Build once, run every variant; ``on_variant(doc)`` gets the partial document after
    each one (a run cut short leaves what it finished). A variant that raises (a kernel
    that cannot take these shapes, out of memory) is recorded with its error and fails the
    verdict; the others still run."""
    from runtime.roles import layer_roles

    config = s.config()
    need = weight_bytes(config)
    doc = {"settings": asdict(s), "weight_bytes": need,
           "roles": [{"layer": r.layer, "flash_layer": s.layers[r.layer], "ratio": r.ratio,
                      "index_mode": r.index_mode, "kv_source": r.kv_source, "engram": r.engram,
                      "candidate_source": r.candidate_source} for r in layer_roles(config)],
           "engram_num_embeddings": list(config.engram_num_embeddings), "variants": []}
    if s.device.startswith("cuda"):
        free, total = torch.cuda.mem_get_info(torch.device(s.device))
        doc["device_memory_gib"] = {"free_before": free / GIB, "total": total / GIB}
    weights, times = build_weights(s, config)
    doc.update(times)
    if s.device.startswith("cuda"):
        doc["device_memory_gib"]["allocated_after_build"] = torch.cuda.memory_allocated() / GIB
    a, b = prompts(s, config.vocab_size)
    for kernels in s.kernels:
        for numerics in s.numerics:
            try:
                row = run_variant(weights, kernels, numerics, s, a, b)
            except Exception as exc:  # noqa: BLE001 - recorded, judged as a failure, the rest go on
                row = {"kernels": kernels, "numerics": numerics,
                       "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
                if s.device.startswith("cuda"):
                    torch.cuda.empty_cache()
            doc["variants"].append(row)
            doc["passed"] = passed(doc["variants"])
            print(summary_line(row), file=sys.stderr, flush=True)
            if on_variant is not None:
                on_variant(doc)
    doc["passed"] = passed(doc["variants"])
    return doc


def passed(variants: list[dict]) -> bool:
    """Every variant ran (or was skipped as unavailable) and every required check holds."""
    required = [ok for row in variants for ok in row.get("checks", {}).values()]
    return bool(required) and all(required) and not any("error" in row for row in variants)


def summary_line(row: dict) -> str:
    head = f"{row['kernels']:9s} {row['numerics']:9s}"
    if "skipped" in row or "error" in row:
        return f"{head} {'skipped: ' + row['skipped'] if 'skipped' in row else 'ERROR ' + row['error']}"
    one = row["warm_vs_cold_one_shot"]
    return (f"{head} hit {row['hit_tokens_counted']} tokens; warm = chunked cold bitwise "
            f"{row['warm_vs_cold_chunked']['bitwise']}; warm vs one-shot cold bitwise {one['bitwise']} "
            f"(max rel diff {one['max_rel_diff']:.2e}, tokens equal {one['tokens_equal']}); TTFT cold "
            f"{row['cold_one_shot']['ttft_s']:.2f} s, warm {row['warm']['ttft_s']:.2f} s")


def environment(device: str) -> dict:
    import platform

    env = {"python": platform.python_version(), "torch": torch.__version__, "platform": platform.platform(),
           "device": device, "gpu": None, "cuda": torch.version.cuda, "triton": None}
    if device.startswith("cuda"):
        env["gpu"] = torch.cuda.get_device_name(torch.device(device))
        try:
            import triton

            env["triton"] = triton.__version__
        except ImportError:
            pass
    return env


def markdown(doc: dict) -> str:
    s, env, wb = doc["settings"], doc["environment"], doc["weight_bytes"]
    mem = doc.get("device_memory_gib", {})
    lines = [
        "# Flash dimensions, reduced layers, Engram on: exact mode after a prefix hit vs cold prefill", "",
        f"Command: `{doc['command']}`", "",
        f"Device: {env['gpu'] or env['device']}; torch {env['torch']}, triton {env['triton']}, CUDA {env['cuda']}; "
        f"{env['platform']}", "",
        f"Flash layers {s['layers']} as layers 0-{len(s['layers']) - 1}"
        + (f", {s['experts']} routed experts (a shape check, not a flash forward)" if s["experts"] else "")
        + f"; Engram tables {doc['engram_num_embeddings']} rows (bucket primes from {s['engram_vocab_size']:,}). "
        f"Weights {wb['total'] / GIB:.2f} GiB (routed experts {wb['routed_experts'] / GIB:.2f}, Engram tables "
        f"{wb['engram_tables'] / GIB:.2f}, embedding + head {wb['embed_head'] / GIB:.2f}, other "
        f"{wb['other'] / GIB:.2f}); drawn on the device in {doc['weights_init_s']:.1f} s, token map "
        f"{doc['token_map_s']:.1f} s"
        + (f"; allocated after the build {mem['allocated_after_build']:.1f} of {mem['total']:.1f} GiB"
           if "allocated_after_build" in mem else "") + ".", "",
        f"Prompts: P {s['prefix']} tokens, A = P + S1, B = P + S2 ({s['suffix']}-token suffixes); chunks of "
        f"{s['chunk']}; greedy, {s['steps']} tokens. Required: the hit is P (the model's counters), warm = chunked "
        "cold bit for bit (same math) in every variant, warm = one-shot cold bit for bit with reference kernels "
        "in invariant numerics; other one-shot differences are reported (max |diff| / max(1, max |logit|)).", "",
        "| kernels | numerics | hit tokens | warm = chunked cold | warm vs one-shot cold | greedy tokens equal "
        "| TTFT one-shot / chunked / warm (s) | peak GiB | required checks |",
        "| --- | --- | ---: | --- | --- | --- | --- | ---: | --- |",
    ]
    for r in doc["variants"]:
        if "skipped" in r or "error" in r:
            what = f"skipped: {r['skipped']}" if "skipped" in r else f"ERROR {r['error']}"
            lines.append(f"| {r['kernels']} | {r['numerics']} | {what} | | | | | | "
                         f"{'-' if 'skipped' in r else 'FAIL'} |")
            continue
        one = r["warm_vs_cold_one_shot"]
        ok = all(r["checks"].values())
        one_shot = "bitwise" if one["bitwise"] else f"{one['max_rel_diff']:.2e}"
        lines.append(
            f"| {r['kernels']} | {r['numerics']} | {r['hit_tokens_counted']} | "
            f"{'yes' if r['warm_vs_cold_chunked']['bitwise'] else 'NO'} | {one_shot} | "
            f"{'yes' if one['tokens_equal'] else 'no'} | {r['cold_one_shot']['ttft_s']:.2f} / "
            f"{r['cold_chunked']['ttft_s']:.2f} / {r['warm']['ttft_s']:.2f} | "
            f"{format(r['peak_allocated_gib'], '.1f') if 'peak_allocated_gib' in r else '-'} | "
            f"{'pass' if ok else 'FAIL'} |")
    planned = len(s["kernels"]) * len(s["numerics"])
    lines += ["", f"Verdict: {'PASS' if doc['passed'] else 'FAIL'} ({len(doc['variants'])} of {planned} variants run"
              + (f", {doc['wall_s']:.0f} s in all" if "wall_s" in doc else "") + ").", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", default=",".join(map(str, FLASH_LAYERS)),
                   help="flash layer ids to keep, comma-separated")
    p.add_argument("--engram-vocab-size", type=int, default=ENGRAM_VOCAB,
                   help="the Engram bucket primes' base (table rows ~ 24 x this)")
    p.add_argument("--prefix", type=int, default=FlashForward.prefix)
    p.add_argument("--suffix", type=int, default=FlashForward.suffix)
    p.add_argument("--chunk", type=int, default=FlashForward.chunk)
    p.add_argument("--steps", type=int, default=FlashForward.steps)
    p.add_argument("--kernels", nargs="+", default=list(VARIANTS_KERNELS), choices=VARIANTS_KERNELS)
    p.add_argument("--numerics", nargs="+", default=list(NUMERICS), choices=NUMERICS)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda")
    p.add_argument("--experts", type=int, default=None, help="fewer routed experts (CPU shape check)")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    try:
        layers = tuple(int(x) for x in args.layers.split(","))
    except ValueError:
        layers = None
    if layers is None:
        print(f"flash_forward.py: --layers: expected comma-separated layer ids, got {args.layers!r}",
              file=sys.stderr)
        return 2
    settings = FlashForward(layers, args.engram_vocab_size, args.prefix, args.suffix, args.chunk, args.steps,
                            tuple(args.kernels), tuple(args.numerics), args.seed, args.device, args.experts)
    why = problem(settings)
    if why is None and args.out.exists() and not args.out.is_dir():
        why = f"--out: {args.out} is not a directory"
    if why:
        print(f"flash_forward.py: {why}", file=sys.stderr)
        return 2
    env = environment(settings.device)
    command = "PYTHONPATH=. python benchmarks/flash_forward.py " + " ".join(sys.argv[1:] if argv is None else argv)
    tag = gpu_tag(env["gpu"] or "cuda") if settings.device.startswith("cuda") else "cpu"

    def write(doc: dict) -> str:
        doc.update(environment=env, command=command)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"flash_forward_{tag}.json").write_text(json.dumps(doc, indent=2) + "\n")
        note = markdown(doc)
        (args.out / f"flash_forward_{tag}.md").write_text(note)
        return note

    t0 = time.perf_counter()
    doc = run(settings, on_variant=write)
    doc["wall_s"] = time.perf_counter() - t0
    print(write(doc))
    return 0 if doc["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
