"""Run chosen fused-op cases of ``benchmarks/kernels.py`` between cudaProfilerStart/Stop, so
Nsight Compute (``ncu --profile-from-start off``) profiles exactly those launches: why a
kernel sits where it does against the roofline (DRAM throughput, occupancy, warp stall
reasons), not only how long it takes.

    ncu --clock-control none --profile-from-start off --section SpeedOfLight \\
        --section Occupancy --section WarpStateStats --csv --page details \\
        python benchmarks/profile_ops.py mhc:flash:4096 attention:mid:64 > ncu.csv

A case is op:scale:rows (the benchmark's own case builders; ``attention_ring`` /
``attention_packed``: rows requests with ring caches of their own; rope_quant takes
op:scale:rows:fmt, the indexer op:scale:rows:keys; ``topk:scale:rows:keys[:form]`` is the
top-k alone on the indexer's scores of that case, computed once before profiling, with the
registry's top-k or the form named: ``chained`` (``topk_tiles.CHAINED``), ``resident``
(its register-resident twin) or ``row_bound`` (the default policy); ``mhc:scale:rows:projection``
is the site with that projection mode at every row count, ``runtime/kernels/mhc_tiles.py``'s
``PROJECTIONS``). Every case is run once before
profiling starts (Triton compiles then), then ``--calls`` times inside the profiled
range, one NVTX range per case. A reading: benchmarks/results/ncu_h200_attention_gate_mhc.md.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

import torch

from benchmarks import kernels as bench
from runtime.config import V41Config
from runtime.errors import ConfigError
from runtime.kernels import KernelRegistry
from runtime.kernels.mhc import FusedMhc
from runtime.kernels.mhc_tiles import PROJECTIONS, MhcPolicy
from runtime.kernels.topk import FusedTopk
from runtime.kernels.topk_tiles import CHAINED, TopkSplitPolicy

TOPK_FORMS = {"chained": CHAINED, "resident": replace(CHAINED, resident=True),
              "row_bound": TopkSplitPolicy()}  # topk cases' forms: the split policies


BUILDERS = {"gate": bench.gate_case, "mhc": bench.mhc_case, "attention": bench.attention_case,
            "inv_rope": bench.inv_rope_case, "compress": bench.compress_case, "engram": bench.engram_case}


def build(ops, spec: str):
    """(label, zero-argument call) of one case spec."""
    parts = spec.split(":")
    if len(parts) < 3:
        raise SystemExit(f"profile_ops: case {spec!r}: expected op:scale:rows[:use or :N]")
    numbers = parts[2:3] + (parts[3:4] if parts[0] in ("indexer", "topk") else [])  # rows[, keys]
    if not all(n.isdigit() for n in numbers):
        raise SystemExit(f"profile_ops: case {spec!r}: expected whole numbers of rows (and keys), got {numbers}")
    op, scale, rows = parts[0], parts[1], int(parts[2])
    try:
        c = V41Config.preset(scale)
    except ConfigError as exc:
        raise SystemExit(f"profile_ops: case {spec!r}: {exc}") from None
    if op == "rope_quant":
        use = next((u for u, (fmt, _) in bench.ROPE_QUANT_USES.items() if fmt == parts[3]), None)
        if use is None:
            raise SystemExit(f"profile_ops: case {spec!r}: rope_quant takes a format, one of "
                             f"{[fmt for fmt, _ in bench.ROPE_QUANT_USES.values()]}")
        _, args = bench.rope_quant_case(ops, c, scale, rows, use)
    elif op == "indexer":
        _, args = bench.indexer_case(ops, c, scale, rows, int(parts[3]))
    elif op == "topk":
        if len(parts) not in (4, 5) or (len(parts) == 5 and parts[4] not in TOPK_FORMS):
            raise SystemExit(f"profile_ops: case {spec!r}: expected topk:scale:rows:keys[:form], form one of "
                             f"{sorted(TOPK_FORMS)}")
        _, args = bench.indexer_case(ops, c, scale, rows, int(parts[3]))
        scores, topk = ops.indexer(*args), FusedTopk(policy=TOPK_FORMS[parts[4]]) if len(parts) == 5 else ops.topk
        return spec, lambda: topk(scores, c.index_topk)
    elif op in bench.RING_OPS:  # a decode batch of ``rows`` requests, bf16 or packed ring caches
        _, args = bench.attention_ring_case(ops, c, scale, rows, packed=op == "attention_packed")
        call = bench.fused_call(ops, op)
        return spec, lambda: call(args)
    elif op == "mhc" and len(parts) == 4:  # a projection mode of the site (mhc_tiles.PROJECTIONS)
        if parts[3] not in PROJECTIONS:
            raise SystemExit(f"profile_ops: case {spec!r}: expected mhc:scale:rows[:projection], projection one "
                             f"of {list(PROJECTIONS)}")
        _, args = bench.mhc_case(ops, c, scale, rows)
        site = FusedMhc(MhcPolicy(projection=parts[3], decode_projection=parts[3]))
        return spec, lambda: site(*args)
    elif op in BUILDERS:
        _, args = BUILDERS[op](ops, c, scale, rows)
    else:
        raise SystemExit(f"profile_ops: case {spec!r}: unknown op {op!r}, expected one of "
                         f"{sorted([*BUILDERS, *bench.RING_OPS, 'indexer', 'rope_quant', 'topk'])}")
    fn = getattr(ops, op)
    return spec, lambda: fn(*args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+")
    parser.add_argument("--calls", type=int, default=1)
    args = parser.parse_args(argv)
    ops = KernelRegistry("fused", device="cuda", on_unavailable="error")
    cases = [build(ops, spec) for spec in args.cases]
    for _, call in cases:
        call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for label, call in cases:
        torch.cuda.nvtx.range_push(label)
        for _ in range(args.calls):
            call()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    torch.cuda.cudart().cudaProfilerStop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
