"""Tile sweep of the fused mHC site, inverse RoPE, RoPE + quant, compress and indexer
kernels on one GPU: which dot precision, warps and tile sizes put them nearest the
roofline (issue 16), each variant checked against the reference before it is timed.

    PYTHONPATH=. python benchmarks/tile_sweep.py --out benchmarks/results [--ops mhc inv_rope]

``--baseline DIR [DIR ...]``: folders each holding an earlier revision of
``runtime/kernels/mhc.py``, ``inv_rope.py``, ``rope_quant.py`` and/or ``compress.py`` (``git show
REV:runtime/kernels/rope_quant.py > DIR/rope_quant.py``); each op, at its own default tiles,
is timed on every case next to the current variants (label "baseline" for one folder,
"baseline <folder name>" for several), so a kernel rewrite, or the steps of one, are
compared in the same run. ``--only LABEL [LABEL ...]``: only the variants of these labels
(a RoPE + quant label without its "<use>: " prefix), to spend little device time on one
question.

Device time per call from CUDA-graph replay, the variants of a case in turn
(``benchmarks/kernels.py``'s ``interleaved_graph_ms``: each variant's graph of 20 calls,
replayed one after another for 9 rounds, medians, at most 16 graphs alive at once, the
first variant in every group; before session 43 each variant was read alone, one after
another), next to an empty Triton kernel and a one-load-one-store
kernel replayed the same way (the floor of an op that touches memory at all). Writes
tile_sweep_<gpu>.json and .md.

``--cold``: every case held to the roofline (memory-bound, >= 4 MiB) is also read with its
inputs out of L2 (``benchmarks/cold.py``: calls cycling through copies of them), as the kernel
table reads it; a sweep replays one case's inputs, which below the L2's 50 MB then come
from L2, and a tiling's rank may differ cold. The variants' cold readings are taken in turn
too, on one set of copies (before session 46 one after another, each on its own copies).

``--sinkhorn-iters N``: the mHC cases with ``hc_sinkhorn_iters`` = N (the release: 20),
reference included, as a diagnostic: the finishing launch's Sinkhorn is a chain of
2N - 1 dependent normalisations, and comparing its per-launch time at N = 1 and 20 says
what that chain costs (the finish stayed at about 3.6 us with a quarter of the D splits:
results/tile_sweep_h200_decode_splits.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import triton.language as tl

from benchmarks.cold import cold_readings_ms
from benchmarks.kernels import (
    HBM_BYTES_PER_S,
    ROPE_QUANT_USES,
    compress_case,
    empty_launch_ms,
    environment,
    graph_ms,
    indexer_case,
    interleaved_graph_ms,
    interleaved_lists_ms,
    inv_rope_case,
    kernel_breakdown,
    mhc_case,
    rope_quant_case,
)
from benchmarks.records import command_line, gpu_tag
from runtime.config import V41Config
from runtime.kernels.backend import jit
from runtime.kernels.compress import FusedPoolNorm
from runtime.kernels.indexer import FusedIndexLogits
from runtime.kernels.indexer_tiles import IndexerPolicy
from runtime.kernels.inv_rope import FusedInverseRope
from runtime.kernels.mhc import FusedMhc
from runtime.kernels.mhc_tiles import MhcPolicy
from runtime.kernels.reference import REFERENCE_OPS
from runtime.kernels.rope_quant import FusedRopeQuant

INV_ROPE_TILES = (1024, 2048, 32768)
# (channels, warps): one 512-channel group per program on 1-2 warps keeps the norm's
# reduction inside a warp (no shared memory, no barrier); on 8-16 warps each thread holds
# fewer channels (static sm_90, Triton 3.6, rows first: 468 instructions per thread on 4
# warps, 333 on 8, 257 on 16), the per-element exp and IEEE division being most of a small
# call's own work (1 warp: 2.87 us against 1.98 on 4 at 64 rows, tile_sweep_h100_session34_compress_1.md)
ELEMENTWISE_TILES = ((4096, 4), (2048, 4), (1024, 4), (512, 4), (512, 2), (512, 1), (8192, 8), (2048, 2),
                     (512, 8), (512, 16), (1024, 8))
# compress in its loops' form (FusedPoolNorm(rows_first=False), the default before session 33:
# the default loads every row before any arithmetic), at the default tile and its neighbours
COMPRESS_LOOPS_TILES = ((512, 4), (512, 2), (1024, 4), (2048, 4))
# (channels, warps; None = the default's); below 1,024 for the small calls of head / tail programs
ROPE_QUANT_TILES = ((None, None), (1024, None), (1024, 4), (1024, 2), (512, 4), (512, 2), (256, 4), (2048, 4),
                    (4096, 4))
# (label, FusedRopeQuant arguments): narrow vectors (the 128-channel MXFP4 index queries)
# whole in the rotating programs at every call size, or never; the default takes them whole
# below 2^16 elements (tile_sweep_h200_rope_quant_whole.md); 512-channel vectors run the
# default's launch in both
ROPE_QUANT_FORMS = (("whole vectors below 512", {"whole_below": 512, "whole_calls_under": 2**62}),
                    ("head / tail programs", {"whole_below": 0}))
# indexer tilings (label, policy); the first is the default
INDEXER_TILES = (("default", IndexerPolicy()),
                 ("queries as rows", IndexerPolicy(keys_as_rows=False)),  # the default before session 14's last sweep
                 ("queries as rows 1 key tile", IndexerPolicy(keys_as_rows=False, key_tiles=1)),  # before session 14
                 ("w8", IndexerPolicy(num_warps=8)),
                 ("w4", IndexerPolicy(num_warps=4)),  # the default's warps everywhere before session 34
                 ("n128", IndexerPolicy(block_n=128)),
                 ("n128 w8", IndexerPolicy(block_n=128, num_warps=8)),
                 ("n32", IndexerPolicy(block_n=32)),  # 256 programs at 8k keys (untimed before session 34)
                 ("1 key tile", IndexerPolicy(key_tiles=1)),
                 ("16 key tiles", IndexerPolicy(key_tiles=16)),
                 # decode calls' key loads not waiting for the counts (untimed, session 22)
                 ("read all", IndexerPolicy(read_all_up_to=16)))
# the indexer's (queries, keys) cases: decode at 128k / 64k / 8k keys
INDEXER_SHAPES = ((1, 131072), (2, 131072), (8, 131072), (1, 65536), (1, 8192), (8, 8192))
OPS = ("mhc", "inv_rope", "rope_quant", "compress", "indexer")
# mHC tilings (label, policy); the first of each list is the default.
MHC_DECODE = (
    ("default", MhcPolicy()),
    ("reload 128", MhcPolicy(reload_d=128)),  # the projection re-reading X' (the default before session 14)
    ("tf32x2", MhcPolicy(decode_projection="tf32x2")),
    ("finish 8 rows", MhcPolicy(decode_finish_rows=8)),
    # the coefficients as [rows, 4, 4] tensors (the decode default before
    # tile_sweep_h200_finish_steps.md), and the register form with div.full's reciprocals
    ("tensor finish", MhcPolicy(decode_finish_registers=False)),
    ("regs finish div.full", MhcPolicy(fast_reciprocal=False)),
    ("d32 w2", MhcPolicy(decode_block_d=32, decode_warps=2)),
    # fewer D splits for the finishing launch to sum (the gate's tail got faster with 16
    # instead of 64: gate_tiles_h200_max_splits.md); mid has 32 by default, flash 80
    ("16 splits", MhcPolicy(programs=16)),
    ("8 splits", MhcPolicy(programs=8)),
    ("d128", MhcPolicy(decode_block_d=128)),
    ("fma mix", MhcPolicy(fma_mix_from=0)),  # the sweep's mixing as fused multiply-adds (mhc_tiles.py)
    ("no fma mix", MhcPolicy(fma_mix_from=1 << 30)),  # the decode default before session 41
    # "tf32x2" for the decode rows that take a dot from 3 rows (the multiply-adds kept at 1-2),
    # and never (the decode default before session 43; from 8 rows in session 43, until
    # "bf16x3" took those rows in session 44)
    ("tf32x2 from 3 rows", MhcPolicy(decode_bf16x3_from=1 << 30, decode_tf32x2_from=3)),
    ("tf32x3 decode", MhcPolicy(decode_bf16x3_from=1 << 30, decode_tf32x2_from=1 << 30)),
    # fn as three bf16 parts, bf16 tensor-core products on X' as stored (runtime/kernels/mhc.py,
    # bf16_split3): at every decode row count; from 3 rows (the decode rows that take a dot)
    # and from 8 on the decode tiles up to 16 rows (sessions 45's and 44's rules before the
    # decode tiles went to 48 rows); never, up to 16 rows (the rule before session 44:
    # "tf32x2" from 8 rows)
    ("bf16x3", MhcPolicy(decode_projection="bf16x3")),
    ("bf16x3 from 3 rows", MhcPolicy(decode_bf16x3_from=3, decode_rows=16, decode_stages=3)),
    ("bf16x3 from 8 rows", MhcPolicy(decode_bf16x3_from=8, decode_rows=16, decode_stages=3)),
    ("tf32x2 from 8 rows", MhcPolicy(decode_bf16x3_from=1 << 30, decode_rows=16, decode_stages=3)),
    # the decode tiles and projections up to 16 rows (the default before session 45; 17-48
    # rows then take the tiles above decode with "tf32x3")
    ("decode tiles to 16", MhcPolicy(decode_rows=16, decode_stages=3)),
    # the decode tiles to 48 rows at 3 stages (session 45's rule, before session 46's flips)
    ("decode to 48 s3", MhcPolicy(decode_rows=48, decode_stages=3)),
    # decode sweeps in one wave at flash's 17-48 rows (session 45's question): at 3 stages
    # the "bf16x3" decode sweep asks 124 KB of shared memory, one program an SM, and flash's
    # 160-240 programs take two waves on 132 SMs; 2 stages (66 KB, three an SM) or 32-column
    # D tiles (62 KB, 96 registers; 160 splits, so 160-480 programs), both timed against 3
    # stages in session 46; 2 stages is the default since (mhc_tiles.py)
    ("decode s2", MhcPolicy(decode_stages=2)),
    ("decode s3", MhcPolicy(decode_stages=3)),
    ("decode d32", MhcPolicy(decode_block_d=32, decode_stages=3)),
    # the decode split in one wave (session 46): at 2 stages three decode programs fit an SM,
    # 396 on 132 SMs; flash 96 rows made 480 at 512 (the rule before; mhc_tiles.py,
    # decode_programs), 396 makes 240 of two D tiles, and 264 (two an SM, the default since
    # session 47) takes 192 rows to 240 of four; 132 / 198 / 330 beside it (session 47).
    # Each "decode pN" aims at N at every hidden size, as when timed: since session 48 the
    # default aims at 132 up to mid's 2048 (narrow_decode_programs), so "decode p264" is the
    # rule before that
    *((f"decode p{n}", MhcPolicy(decode_programs=n, narrow_decode_programs=0))
      for n in (396, 264, 512, 132, 198, 330)),
)
MHC_MANY = (
    ("default", MhcPolicy()),
    ("fma mix", MhcPolicy(fma_mix_from=0)),
    ("no fma mix", MhcPolicy(fma_mix_from=1 << 30)),  # the default above decode before session 23
    ("pdl off", MhcPolicy(dependent_finish_to=0)),  # the finishing launch not dependent (runtime/kernels/pdl.py)
    ("pdl at exit", MhcPolicy(dependent_finish_to=1 << 30, finish_at_exit_from=0)),  # dependent, launched as the sweep exits
    ("before session 14", MhcPolicy(pin_mix=False, reload_d=128)),  # re-read below the tail, tail not pinned
    ("not pinned", MhcPolicy(pin_mix=False)),  # every dot recomputing the mixing in its operand's layout
    ("reload 128", MhcPolicy(reload_d=128)),  # below the tail the projection re-reads X'
    ("tf32x2", MhcPolicy(projection="tf32x2")),
    ("tf32x2 tail d32", MhcPolicy(projection="tf32x2", tail_block_d=32)),
    # fn as three bf16 parts (untimed before session 44): static sm_90 under Triton 3.6 at
    # 4,096 mid rows, the sweep loop 1,344 -> 690 instructions and 250 -> 146 registers on
    # the default's tiles; on 4 warps 489 (135 registers); 64-row blocks on 4 warps take
    # Hopper's warp-group MMAs
    ("bf16x3", MhcPolicy(projection="bf16x3")),
    ("bf16x3 w4", MhcPolicy(projection="bf16x3", num_warps=4)),
    ("bf16x3 tail t64 w4", MhcPolicy(projection="bf16x3", num_warps=4, tail_block_t=64)),
    # the sweep's pipelining stages (Triton's default 3; untimed before session 44): fewer
    # buffers in shared memory, more programs per SM where registers allow (bf16x3: 146
    # registers, 22 KB at 2 stages against 39), 1 stage loading into registers
    ("s1", MhcPolicy(stages=1)),
    ("s2", MhcPolicy(stages=2)),
    ("s4", MhcPolicy(stages=4)),
    ("bf16x3 s1", MhcPolicy(projection="bf16x3", stages=1)),
    ("bf16x3 s2", MhcPolicy(projection="bf16x3", stages=2)),
    # 64-row blocks on 2 warps with the mixing's coefficients loaded per D tile (untimed
    # before session 45): fn's parts read once per 64 rows, not 32 (0.75x the default's L2
    # bytes of fn; the coefficients are re-read from L1); static sm_90 under Triton 3.6, mid
    # 4,096 rows: 182 registers, no stack, 63 KB of shared memory (3 programs an SM), at 2
    # stages 197 and 36 KB (5 an SM, against the default's 4 of 32 rows); held through the
    # loop the same tiles spill. All three 1.5-2.2x slower than the default on an H100
    # (tile_sweep_h100_session45_per_tile.md)
    ("bf16x3 t64 per-tile", MhcPolicy(projection="bf16x3", block_t=64, block_d=16, tail_block_t=64,
                                      coefficients_per_tile=True)),
    ("bf16x3 t64 per-tile s2", MhcPolicy(projection="bf16x3", block_t=64, block_d=16, tail_block_t=64,
                                         coefficients_per_tile=True, stages=2)),
    ("bf16x3 t64 s2", MhcPolicy(projection="bf16x3", block_t=64, block_d=16, tail_block_t=64, stages=2)),
    ("t32", MhcPolicy(block_t=32)),
    # above decode up to 256 rows the decode finish (1-row programs, 1 warp, the register
    # coefficients), above that 8-row programs with the register coefficients
    # (tile_sweep_h200_finish_rows.md); the default before it: 8-row programs above decode with
    # the tensor coefficients; the 8-row finish from decode up; the tensor coefficients above 256
    ("before session 18", MhcPolicy(decode_finish_to=0, finish_registers=False)),
    ("finish 8 rows", MhcPolicy(decode_finish_to=0)),
    ("tensor finish", MhcPolicy(finish_registers=False)),
    ("decode finish to 64", MhcPolicy(decode_finish_to=64)),
    ("decode tiles to 512", MhcPolicy(decode_rows=512)),
    # the ticket's tail from fewer rows: at 512 rows the finishing launch was 40 % of the
    # site (ncu_h200_session14.md)
    ("tail from 512", MhcPolicy(tail_rows=512)),
    ("tail from 256", MhcPolicy(tail_rows=256)),
    # the projection in a launch of its own from 256 rows (untimed before session 49; off by
    # default, MhcPolicy.apart_from): static sm_90 under Triton 3.6 (tests/runtime/compile_sm90.py
    # --sass, mid 4,096 rows), the sweep without it 103 registers and 469 loop instructions per
    # 16 x 64 tile on 4 warps (about 15 a (row, column, stream) element, against about 42 in
    # the default's tail; 16 x 128: 175 and 940); the projection "tf32x3" 244 registers and
    # 1,919 loop instructions per 64 x 64 tile, "bf16x3" 90 and 457 (32 rows: 140 and 510); the
    # sweep's other tiles and the projection's rows beside them
    ("apart", MhcPolicy(apart_from=256)),
    ("apart bf16x3", MhcPolicy(apart_from=256, projection="bf16x3")),
    ("apart d128", MhcPolicy(apart_from=256, apart_sweep_d=128)),
    ("apart d128 bf16x3", MhcPolicy(apart_from=256, apart_sweep_d=128, projection="bf16x3")),
    ("apart t32 bf16x3", MhcPolicy(apart_from=256, apart_t=32, projection="bf16x3")),
    ("apart p1024 bf16x3", MhcPolicy(apart_from=256, apart_programs=1024, projection="bf16x3")),
)


def _load_store_kernel(x_ptr, y_ptr):
    tl.store(y_ptr, tl.load(x_ptr) + 1.0)


def load_store_ms() -> float:
    kernel = jit(_load_store_kernel)
    x, y = torch.zeros(1, device="cuda"), torch.zeros(1, device="cuda")
    return graph_ms(lambda: kernel[(1,)](x, y))


def worst_rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


@dataclass(frozen=True)
class ColdCall:
    """How a variant is read cold (benchmarks/cold.py): ``call(args)`` on the case's
    ``args`` and clones of them, the case moving ``bytes_moved`` bytes a call."""

    call: Callable
    args: tuple
    bytes_moved: float


@dataclass(frozen=True)
class Variant:
    """One variant of a case, ready to time: ``fn`` runs it on the case's inputs, ``got`` is
    its output (checked against ``want``, the reference's), ``cold`` how it is read with
    its inputs out of L2, or None."""

    config: str
    fn: Callable
    got: object
    want: object
    cold: ColdCall | None = None


def timed(op_name: str, scale: str, rows: int, mb: float, variants: list[Variant],
          timer: Callable = interleaved_graph_ms, lists_timer: Callable = interleaved_lists_ms) -> list[dict]:
    """The sweep rows of one case: every variant checked against the reference, then all of
    them timed together by ``timer`` (fns -> ms per call each, or None where a call cannot
    be captured: benchmarks/kernels.py's graph replays in turn, so a drift of the machine
    through the case reaches every variant alike), then the cold readings where asked, again
    all together (``lists_timer``: lists of calls -> ms per call each; before session 46 each
    variant's cold reading was taken alone, one after another)."""
    errs = []
    for v in variants:
        pairs = list(zip(v.got, v.want, strict=True)) if isinstance(v.want, tuple) else [(v.got, v.want)]
        errs.append(max(worst_rel(a, b) for a, b in pairs))
    hot = timer([v.fn for v in variants])
    colds = cold_readings(variants, hot, lists_timer)
    out = []
    for v, err, ms, cold in zip(variants, errs, hot, colds, strict=True):
        row = {"op": op_name, "scale": scale, "rows": rows, "config": v.config, "mb": mb,
               "us": None if ms is None else ms * 1e3,
               "roofline": None if ms is None else mb * 1e6 / HBM_BYTES_PER_S / (ms * 1e-3), "max_rel_err": err}
        if cold is not None and cold[0] is not None:
            cold_ms, copies = cold
            row.update(cold_us=cold_ms * 1e3, cold_copies=copies,
                       cold_roofline=mb * 1e6 / HBM_BYTES_PER_S / (cold_ms * 1e-3))
        print(row, flush=True)
        out.append(row)
    return out


def cold_readings(variants: list[Variant], hot_ms: list[float | None],
                  lists_timer: Callable) -> list[tuple[float | None, int] | None]:
    """(cold ms, copies) of each variant that asks for a cold reading, else None: all of them
    read in turn on one set of clones of the case's inputs (benchmarks/cold.py's
    ``cold_readings_ms``, which reads none cold that was not captured hot: ms None)."""
    asked = [i for i, v in enumerate(variants) if v.cold is not None]
    out: list[tuple[float | None, int] | None] = [None] * len(variants)
    if not asked:
        return out
    first = variants[asked[0]].cold
    if any(variants[i].cold.args is not first.args or variants[i].cold.bytes_moved != first.bytes_moved
           for i in asked):
        raise ValueError("tile_sweep.timed: the variants of one case must share its inputs for their cold readings")
    times, copies = cold_readings_ms([variants[i].cold.call for i in asked], first.args, first.bytes_moved,
                                     lists_timer, [hot_ms[i] for i in asked])
    for i, ms in zip(asked, times, strict=True):
        out[i] = (ms, copies)
    return out


def cold_reading(case, op, args, cold: bool) -> ColdCall | None:
    """How ``op`` on ``args`` is read cold where asked and the case is held to the roofline
    (memory-bound, >= 4 MiB: benchmarks/kernels.py), else None."""
    if not (cold and case.holds_to_roofline):
        return None
    return ColdCall(lambda a, op=op: op(*a), args, case.bytes)


def flat_mhc(result) -> tuple:
    streams, mix, x = result
    return streams, x, mix.pre, mix.post, mix.comb


def sweep_mhc(name: str, c: V41Config, t: int, baseline: list[tuple[str, object]],
              only: tuple[str, ...] | None = None, cold: bool = False) -> list[dict]:
    variants = chosen([(label, FusedMhc(policy)) for label, policy in
                       (MHC_DECODE if t <= MhcPolicy().decode_rows else MHC_MANY)] + baseline, only)
    if not variants:
        return []
    case, args = mhc_case(None, c, name, t)
    want = flat_mhc(REFERENCE_OPS["mhc"](*args))
    rows = timed("mhc", name, t, case.bytes / 1e6,
                 [Variant(label, lambda op=op, a=args: op(*a), flat_mhc(op(*args)), want,
                          cold_reading(case, op, args, cold)) for label, op in variants])
    # per launch, every variant (each op made once, as the registry holds one: a fresh one per
    # call would allocate ticket counters each time)
    for row, (_, op) in zip(rows, variants, strict=True):
        row["kernels_us"] = kernel_breakdown(lambda op=op, a=args: op(*a))
        grids = mhc_grids(op, t, c.hidden_size)
        if grids is not None:
            row["grids"] = grids
        print(f"mhc {name} T={t} {row['config']}, per launch (us):", row["kernels_us"], "grids", grids, flush=True)
    return rows


def mhc_grids(op, t: int, d: int) -> list[list[int]] | None:
    """The grid of each launch an mHC op makes on CUDA for ``t`` rows of hidden size ``d``
    (its policy's tiles: the sweep, the projection's own launch if apart, then the finish
    unless the tail finishes), or None for
    an op without a policy (an earlier revision's module may have none). Why: a program
    count past what the GPU holds at once takes a second wave, which the per-launch times
    alone do not show (runtime/kernels/mhc_tiles.py, ``decode_programs``)."""
    policy = getattr(op, "policy", None)
    if policy is None or not hasattr(policy, "tiling"):
        return None
    tiles = policy.tiling(t, d, cuda=True)
    apart = [list(tiles.project_grid(t, d))] if getattr(tiles, "apart", False) else []
    return [list(tiles.grid(t, d))] + apart + ([] if tiles.tail else [list(tiles.finish_grid(t, d))])


def chosen(variants: list[tuple[str, object]], only: tuple[str, ...] | None) -> list[tuple[str, object]]:
    """The (label, op) of ``variants`` whose label is one of ``only`` (None: all of them)."""
    return list(variants) if only is None else [(label, op) for label, op in variants if label in only]


def sweep_simple(op_name: str, case_and_args, variants, name: str, t: int, label: str = "",
                 only: tuple[str, ...] | None = None, cold: bool = False) -> list[dict]:
    """Every (label, op) of ``variants`` (those named in ``only``, if given) on one case,
    against the reference op; ``cold``: with cold readings where the roofline goal applies."""
    variants = chosen(variants, only)
    if not variants:
        return []
    case, args = case_and_args
    want = REFERENCE_OPS[op_name](*args)
    return timed(op_name, name, t, case.bytes / 1e6,
                 [Variant(f"{label}{config}", lambda op=op, a=args: op(*a), op(*args), want,
                          cold_reading(case, op, args, cold)) for config, op in variants])


def baseline_ops(folders: Path | list[Path] | None,
                 ops: tuple[str, ...] | None = None) -> dict[str, list[tuple[str, object]]]:
    """op name -> [(label, the op of an earlier revision's module in each folder)], for the
    modules present among ``ops`` (None: every one): the extra sweep variants of that op
    (the gate's are timed by benchmarks/gate_tiles.py). The label is "baseline" when one
    folder is given, "baseline <folder name>" when several. A module of an op not asked for
    is not imported."""
    folders = [] if folders is None else [folders] if isinstance(folders, Path) else list(folders)
    found: dict[str, list[tuple[str, object]]] = {}
    for folder in folders:
        label = "baseline" if len(folders) == 1 else f"baseline {folder.name}"
        for op_name, file, cls in (("mhc", "mhc.py", "FusedMhc"), ("inv_rope", "inv_rope.py", "FusedInverseRope"),
                                   ("rope_quant", "rope_quant.py", "FusedRopeQuant"), ("gate", "gate.py", "FusedGate"),
                                   ("compress", "compress.py", "FusedPoolNorm")):
            path = folder / file
            if (ops is not None and op_name not in ops) or not path.is_file():
                continue
            spec = importlib.util.spec_from_file_location(f"baseline_{op_name}_{len(found.get(op_name, []))}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            found.setdefault(op_name, []).append((label, getattr(module, cls)()))
    return found


def sweep(rows_list: tuple[int, ...], ops: tuple[str, ...],
          baseline: dict[str, list[tuple[str, object]]] | None = None, sinkhorn_iters: int | None = None,
          only: tuple[str, ...] | None = None, cold: bool = False,
          indexer_shapes: tuple[tuple[int, int], ...] = INDEXER_SHAPES) -> list[dict]:
    """``only``: the variant labels to time (None: all; a RoPE + quant label without its
    "<use>: " prefix); ``cold``: also a cold reading of every case held to the roofline;
    ``indexer_shapes``: the indexer's (queries, keys) cases."""
    baseline = baseline or {}
    out = []
    for name in ("mid", "flash"):
        c = V41Config.preset(name)
        mhc_config = c if sinkhorn_iters is None else c.replace(hc_sinkhorn_iters=sinkhorn_iters)
        for t in rows_list:
            if "mhc" in ops:
                out += sweep_mhc(name, mhc_config, t, baseline.get("mhc", []), only, cold)
            if "inv_rope" in ops:
                out += sweep_simple("inv_rope", inv_rope_case(None, c, name, t),
                                    [(f"tile {tile} w4", FusedInverseRope(tile_elements=tile)) for tile in INV_ROPE_TILES]
                                    + baseline.get("inv_rope", []),
                                    name, t, only=only, cold=cold)
            if "rope_quant" in ops:
                for use in ROPE_QUANT_USES:
                    out += sweep_simple("rope_quant", rope_quant_case(None, c, name, t, use),
                                        [("default" if tile is None else f"tile {tile} w{w or 'by size'}",
                                          FusedRopeQuant(tile_elements=tile, num_warps=w))
                                         for tile, w in ROPE_QUANT_TILES]
                                        + [(label, FusedRopeQuant(**kw)) for label, kw in ROPE_QUANT_FORMS]
                                        + baseline.get("rope_quant", []),
                                        name, t, label=f"{use}: ", only=only, cold=cold)
            if "compress" in ops:
                out += sweep_simple("compress", compress_case(None, c, name, max(2, t)),
                                    [("default", FusedPoolNorm())]
                                    + [(f"tile {tile} w{w}", FusedPoolNorm(tile_elements=tile, num_warps=w))
                                       for tile, w in ELEMENTWISE_TILES]
                                    + [(f"loops tile {tile} w{w}",
                                        FusedPoolNorm(tile_elements=tile, num_warps=w, rows_first=False))
                                       for tile, w in COMPRESS_LOOPS_TILES]
                                    + baseline.get("compress", []), name, max(2, t), only=only, cold=cold)
        if "indexer" in ops:
            for t, n in indexer_shapes:
                out += sweep_simple("indexer", indexer_case(None, c, name, t, n),
                                    [(label, FusedIndexLogits(policy)) for label, policy in INDEXER_TILES],
                                    name, t, label=f"N={n}: ", only=only, cold=cold)
    return out


def markdown(env: dict, rows: list[dict], floors: dict, command: str, sinkhorn_iters: int | None = None) -> str:
    lines = ["# Tile sweep: mHC, inverse RoPE, RoPE + quant, compress, indexer", "",
             f"- GPU: {env['gpu']}; torch {env['torch']}, triton {env['triton']}, CUDA {env['cuda']}",
             f"- Command: `{command}`",
             *([f"- A diagnostic: mHC with `hc_sinkhorn_iters` = {sinkhorn_iters} (the release: 20), the "
                "reference too."] if sinkhorn_iters is not None else []),
             f"- Floors, graph replay: empty kernel {floors['empty_us']:.2f} us, one load + one store "
             f"{floors['load_store_us']:.2f} us.",
             "- us: per call, each variant's graph of 20 calls, the variants of a case replayed in turn for 9 "
             "rounds (medians; benchmarks/kernels.py's interleaved_graph_ms); n/a: no graph.",
             "- max rel err: worst |fused - reference| / max |reference| over every output (bf16 inputs).",
             "- cold us / cold roofline (with --cold, cases held to the roofline): the calls cycling through "
             "copies of the inputs so none is read from L2 (benchmarks/cold.py); - where not measured.", "",
             "| op | scale | rows | config | MB | us | roofline | max rel err | cold us | cold roofline |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        cold = f"{r['cold_us']:.2f} | {r['cold_roofline']:.0%}" if "cold_us" in r else "- | -"
        us, roof = ("n/a", "n/a") if r["us"] is None else (f"{r['us']:.2f}", f"{r['roofline']:.0%}")
        lines.append(f"| {r['op']} | {r['scale']} | {r['rows']} | {r['config']} | {r['mb']:.2f} | {us} | "
                     f"{roof} | {r['max_rel_err']:.1e} | {cold} |")
    lines += ["", "mHC, device time per launch of a call (torch.profiler, eager; "
              "#n: the call's n-th launch; grids: each launch's programs, row blocks x D splits (+ 1 for "
              "the finish's coefficient program), from the variant's policy):", ""]
    for r in rows:
        if "kernels_us" in r:
            parts = ", ".join(f"{k} {v:.2f} us" for k, v in r["kernels_us"].items())
            grids = ", ".join(" x ".join(map(str, g)) for g in r.get("grids", []))
            lines.append(f"- {r['scale']} T={r['rows']} {r['config']}: {parts}" + (f"; grids {grids}" if grids else ""))
    return "\n".join(lines) + "\n"


def shape_arg(text: str, parser: argparse.ArgumentParser) -> tuple[int, int]:
    """One ``--indexer-shapes`` entry, "T:N" (queries, keys), both positive."""
    t, sep, n = text.partition(":")
    if not (sep and t.isdigit() and n.isdigit() and int(t) > 0 and int(n) > 0):
        parser.error(f"--indexer-shapes {text!r}: expected queries:keys, two positive integers (e.g. 8:8192)")
    return int(t), int(n)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 64, 512, 4096])
    parser.add_argument("--ops", nargs="+", default=list(OPS), choices=OPS)
    parser.add_argument("--baseline", type=Path, nargs="+", default=None,
                        help="folders, each with an earlier revision's mhc.py / inv_rope.py / rope_quant.py / compress.py "
                             "to time alongside")
    parser.add_argument("--only", nargs="+", default=None,
                        help="time only the variants with these labels (e.g. default 'whole vectors below 512')")
    parser.add_argument("--cold", action="store_true",
                        help="also read every case held to the roofline (memory-bound, >= 4 MiB) with its inputs "
                             "out of L2 (benchmarks/cold.py)")
    parser.add_argument("--indexer-shapes", nargs="+", default=None, metavar="T:N",
                        help="the indexer's cases as queries:keys (default: "
                             + " ".join(f"{t}:{n}" for t, n in INDEXER_SHAPES) + ")")
    parser.add_argument("--sinkhorn-iters", type=int, default=None,
                        help="a diagnostic: the mHC cases with this many Sinkhorn iterations (the release: 20)")
    args = parser.parse_args(argv)
    for folder in args.baseline or []:
        if not folder.is_dir():
            parser.error(f"--baseline {folder}: not a folder")
    if args.sinkhorn_iters is not None and args.sinkhorn_iters < 1:
        parser.error(f"--sinkhorn-iters: expected a positive count, got {args.sinkhorn_iters}")
    indexer_shapes = INDEXER_SHAPES if args.indexer_shapes is None else tuple(
        shape_arg(text, parser) for text in args.indexer_shapes)
    ops = tuple(args.ops)
    if not torch.cuda.is_available():
        print("benchmarks/tile_sweep.py: needs a CUDA GPU", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    floors = {"empty_us": empty_launch_ms() * 1e3, "load_store_us": load_store_ms() * 1e3}
    print(floors, flush=True)
    rows = sweep(tuple(args.rows), ops, baseline_ops(args.baseline, ops), args.sinkhorn_iters,
                 None if args.only is None else tuple(args.only), args.cold, indexer_shapes)
    env = environment()
    command = command_line("benchmarks/tile_sweep.py", argv or sys.argv[1:])
    tag = gpu_tag(env["gpu"])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"tile_sweep_{tag}.json").write_text(json.dumps(
        {"environment": env, "command": command, **floors, "sinkhorn_iters": args.sinkhorn_iters, "rows": rows},
        indent=2) + "\n")
    doc = markdown(env, rows, floors, command, args.sinkhorn_iters)
    (args.out / f"tile_sweep_{tag}.md").write_text(doc)
    print(doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
