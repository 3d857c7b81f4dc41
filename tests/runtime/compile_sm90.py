"""Compile Triton kernels for sm_90 (H100/H200) without a GPU: Triton's front end and the
ptxas its wheel ships. Run as a script by test_kernels_compile_sm90.py, in a process of
its own, because the test session imports Triton for the interpreter (tests/conftest.py),
after which nothing compiles in that process.

    python tests/runtime/compile_sm90.py [--sass] [--out DIR] [--attention-table] ROWS:D [ROWS:D ...]

For each (rows, hidden size) it compiles the fused mHC site kernel's launches as FusedMhc
makes them on CUDA (``runtime.kernels.mhc.site_launches`` with the default policy, and the
finish candidates), then the RoPE + quant kernel's formats and packed forms
(``FusedRopeQuant.launch``), the gate's launches at mid / flash
(``runtime.kernels.gate.gate_launches``), the indexer logits' at decode and 512 queries, and attention's packed ring and untimed tile
options (``--attention-table``: and the tile table's rows at head dim 512), and prints
one line per launch: "ok <name>" or "error <name>: <message>". Exit status 2: Triton
cannot compile for CUDA here at all; 1: some launch failed; 0: all compiled.

``--table-shared`` (alone): instead, attention's tile-table launches in bf16 and float32
with the shared memory each asks for, and an error for any over sm_90's 232,448 bytes:
such a launch compiles but cannot run (the H100 refused float32 64-head tiles of 3 stages
in session 31).

``--inductor`` (alone): instead, every launch of each op that launches dependently
(``pdl_launch_pairs``: attention, the mHC site, the gate, the three top-k forms), in its PDL
form, compiled as
torch.compile re-emits a kernel that a compiled region calls (``as_inductor_emits``), each
"ok" line with the count of griddepcontrol instructions in its PTX.

``--sass``: each "ok" line also gives the compiled kernel's static resources, read with
the cuobjdump Triton's wheel ships: registers per thread, stack bytes (spills), static
shared bytes, SASS instructions and counts of a few opcodes (tensor-core MMAs, shuffles,
barriers, global / shared loads and stores, special-function ops). What a launch will
hold on the GPU, read without one: a CPU session's evidence for a tiling, not a timing.
``--out DIR`` (with --sass) writes them to DIR/sass_static_sm90.json and .md, or under
another stem with ``--name STEM`` (a table of another Triton version beside the first).

The Triton first on ``sys.path`` compiles. The H200 machine runs Triton 3.6, whose code
can differ from a newer one's: ``pip install --no-deps --target DIR triton==3.6.0`` and run
with ``PYTHONPATH=DIR`` to read what that machine will run (session 15 found the flash mHC
finish's partial loads issued 10 at a time under 3.6, 48 at once under the fix, this way).
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

# (the tests that compile one kernel take these two from here as well)
from benchmarks.sm90_compile import compile_sm90, divisible_by_16  # noqa: E402

SITE_SIGNATURE = {  # _mhc_site_kernel's runtime arguments, bf16 streams
    "streams_ptr": "*bf16", "out_ptr": "*bf16", "prev_post_ptr": "*fp32", "prev_comb_ptr": "*fp32",
    "pre_shift_ptr": "*fp32", "fn_ptr": "*fp32", "fn_lo_ptr": "*fp32", "base_ptr": "*fp32", "scale_ptr": "*fp32", "norm_w_ptr": "*bf16",
    "new_streams_ptr": "*bf16", "x_ptr": "*bf16", "part_ptr": "*fp32", "count_ptr": "*i32", "pre_ptr": "*fp32",
    "post_ptr": "*fp32", "comb_ptr": "*fp32", "T": "i32", "D": "i32", "SPLIT_D": "i32", "norm_eps": "fp32",
    "hc_eps": "fp32", "sinkhorn_iters": "i32",
}


def one_load_one_store(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr) + 1.0)


def site_launches(rows: int, d: int, policy=None) -> list[tuple[str, dict, tuple[str, ...]]]:
    """The mHC site's launches as FusedMhc makes them on CUDA for bf16 streams under
    ``policy`` (default MhcPolicy()), with the integer arguments a launch would specialize
    as multiples of 16."""
    import torch

    from runtime.kernels import mhc
    from runtime.kernels.mhc_tiles import MhcPolicy

    policy = policy or MhcPolicy()
    tiles = policy.tiling(rows, d, cuda=True)
    multiples = divisible_by_16(T=rows, D=d, SPLIT_D=tiles.split_d)
    decode_finish = not tiles.tail and 1 < rows <= policy.decode_rows  # rows per finishing program vary here
    form = (" register-finish" if tiles.finish_registers else "") + (
        f" {tiles.tail_t}-row-finish" if decode_finish else "") + (" fma-mix" if tiles.fma_mix else "") + (
        " per-tile" if tiles.coefficients_per_tile else "")
    return [(f"mhc T={rows} D={d} phase {kwargs['PHASE']} {tiles.projection}{form}", kwargs, multiples)
            for _, kwargs in mhc.site_launches(tiles, rows, d, True, torch.bfloat16)]


def finish_candidate_launches(rows: int, d: int) -> list[tuple[str, dict, tuple[str, ...]]]:
    """The finishing launches of the finish forms that are not the default: the other form
    of the coefficients (``MhcPolicy.finish_registers`` / ``decode_finish_registers``: the
    tensor form, the default being the register form everywhere), and 8 rows per
    decode program (``decode_finish_rows``, the default before
    tile_sweep_h200_mhc_finish.md) where that differs from the default. Sweeps without a
    tail are the default's."""
    from runtime.kernels.mhc import SWEEP
    from runtime.kernels.mhc_tiles import MhcPolicy

    default = MhcPolicy().tiling(rows, d, cuda=True)
    other = not default.finish_registers
    policies = [MhcPolicy(finish_registers=other, decode_finish_registers=other)]
    if not default.tail and default.tail_t != MhcPolicy(decode_finish_rows=8).tiling(rows, d, cuda=True).tail_t:
        policies.append(MhcPolicy(decode_finish_rows=8))
    return [launch for policy in policies for launch in site_launches(rows, d, policy)
            if launch[1]["PHASE"] != SWEEP.value]


def sweep_candidate_launches(rows: int, d: int) -> list[tuple[str, dict, tuple[str, ...]]]:
    """The sweeping launch with the mixing's other form (``MhcPolicy.fma_mix_from``: fused
    multiply-adds below 512 rows, where the default mixes without them, and the plain
    mixing from 512, where the default takes them)."""
    from runtime.kernels.mhc import FINISH
    from runtime.kernels.mhc_tiles import MhcPolicy

    other = MhcPolicy(fma_mix_from=(1 << 30) if MhcPolicy().tiling(rows, d, cuda=True).fma_mix else 0)
    return [launch for launch in site_launches(rows, d, other) if launch[1]["PHASE"] != FINISH.value]


def bf16x3_sweep_launches(rows: int, d: int) -> list[tuple[str, dict, tuple[str, ...]]]:
    """The sweeping launch with the "bf16x3" projection (fn's three bf16 parts:
    ``runtime.kernels.mhc.bf16_split3``) from 512 rows, where it is not the default (it is
    at 3-192 decode rows, compiled with the default's launches). Its fn pointers are bf16:
    ``BF16X3_SITE_SIGNATURE``."""
    from runtime.kernels.mhc import FINISH
    from runtime.kernels.mhc_tiles import MhcPolicy

    if rows < 512:
        return []
    return [launch for launch in site_launches(rows, d, MhcPolicy(projection="bf16x3"))
            if launch[1]["PHASE"] != FINISH.value]


def per_tile_sweep_launches(rows: int, d: int) -> list[tuple[str, dict, tuple[str, ...]]]:
    """From 512 rows, the sweeping launch on 64-row blocks of 2 warps with "bf16x3" and 2
    stages, the mixing's coefficients loaded in every D tile
    (``MhcPolicy.coefficients_per_tile``, the sweep variant "bf16x3 t64 per-tile s2" of
    benchmarks/tile_sweep.py): held through the loop instead, these tiles spill."""
    from runtime.kernels.mhc import FINISH
    from runtime.kernels.mhc_tiles import MhcPolicy

    if rows < 512:
        return []
    policy = MhcPolicy(projection="bf16x3", block_t=64, block_d=16, tail_block_t=64, stages=2,
                       coefficients_per_tile=True)
    return [launch for launch in site_launches(rows, d, policy) if launch[1]["PHASE"] != FINISH.value]


def apart_launches(rows: int, d: int) -> list[tuple[str, dict, tuple[str, ...]]]:
    """From 512 rows, the projection in a launch of its own (``MhcPolicy.apart_from``, the
    sweep variants "apart" of benchmarks/tile_sweep.py) with "tf32x3" and "bf16x3": the sweep
    without the projection, the projection, the finish."""
    from runtime.kernels.mhc_tiles import MhcPolicy

    if rows < 512:
        return []
    return [(name + " apart", kwargs, multiples) for projection in ("tf32x3", "bf16x3")
            for name, kwargs, multiples in site_launches(rows, d, MhcPolicy(projection=projection, apart_from=512))]


BF16X3_SITE_SIGNATURE = {**SITE_SIGNATURE, "fn_ptr": "*bf16", "fn_lo_ptr": "*bf16"}


ROPE_QUANT_SIGNATURE = {"x_ptr": "*bf16", "cos_ptr": "*fp32", "sin_ptr": "*fp32", "V": "i32", "H": "i32",
                        "HEAD_PROGRAMS": "i32"}


def rope_quant_launches() -> list[tuple[str, dict, dict, tuple[str, ...]]]:
    """RoPE + quant as FusedRopeQuant launches it on bf16 vectors: the window KV (FP8), the
    entries (NVFP4) and the index queries (MXFP4) at 512 / 128 channels with a 64-wide rope
    tail, 4,096 rows, and the packed FP8 / NVFP4 form."""
    import torch

    from runtime.kernels.rope_quant import FORMATS, FusedRopeQuant

    op = FusedRopeQuant()
    out = []
    for fmt, channels, pack in (("fp8", 512, False), ("nvfp4", 512, False), ("mxfp4", 128, False),
                                ("fp8", 512, True), ("nvfp4", 512, True)):
        code, block = FORMATS[fmt]
        outs = {"out_ptr": "*u8" if pack else "*bf16", "scales_ptr": "*u8" if pack else "*bf16"}
        _, kwargs = op.launch(4096, channels, 32, code, block, torch.bfloat16, pack, cuda=True)
        out.append((f"rope_quant {fmt}{' pack' if pack else ''} C={channels}", {**ROPE_QUANT_SIGNATURE, **outs},
                    kwargs, divisible_by_16(V=4096, H=1, HEAD_PROGRAMS=kwargs["HEAD_PROGRAMS"])))
    return out


GATE_SIGNATURE = {"x_ptr": "*bf16", "w_ptr": "*bf16", "bias_ptr": "*fp32", "part_ptr": "*fp32", "out_w_ptr": "*fp32",
                  "out_ids_ptr": "*i64", "T": "i32", "E": "i32", "D": "i32", "SPLIT_D": "i32", "inv_temp": "fp32",
                  "route_scale": "fp32"}


def gate_launches() -> list[tuple[str, dict, dict, tuple[str, ...]]]:
    """The gate's launches as FusedGate makes them on bf16 inputs (``gate_launches`` with
    the default policy, and each selecting launch again with its rounds' other form:
    ``GatePolicy.pair_from``; "paired" in a name: the rounds reduce pairs) at ``mid`` and
    ``flash``, 1 / 8 / 64 / 512 rows: the one-launch ticket path and the partials-then-select pair."""
    from runtime.config import V41Config
    from runtime.kernels.gate import gate_launches as launches
    from runtime.kernels.gate_tiles import GatePolicy

    out = []
    for name in ("mid", "flash"):
        c = V41Config.preset(name)
        d, e = c.hidden_size, c.n_routed_experts
        # the rounds' other form: pairs where the default's rounds do not, max and sum where they do
        other = GatePolicy(pair_from=1 << 30 if GatePolicy().tiling(1, d, e).pair_reduce else 0)
        for t, policy in itertools.product((1, 8, 64, 512), (GatePolicy(), other)):
            tiles = policy.tiling(t, d, e)
            count = "*i64" if tiles.select_rows or tiles.one_program(d, e) else "*i32"  # the ticket counters
            for _, kwargs in launches(tiles, t, d, e, c, ieee=False):
                if policy is other and kwargs["PHASE"] == 1:
                    continue  # partials only: nothing selects
                label = " paired" if kwargs["PAIRED"] else ""  # (never the partials' launch: it selects nothing)
                out.append((f"gate {name} T={t} phase {kwargs['PHASE']}{label}", {**GATE_SIGNATURE, "count_ptr": count},
                            kwargs, divisible_by_16(T=t, E=e, D=d, SPLIT_D=tiles.split_d)))
    return out


INDEXER_SIGNATURE = {"q_ptr": "*bf16", "w_ptr": "*fp32", "k_ptr": "*bf16", "counts_ptr": "*i64", "out_ptr": "*fp32",
                     "T": "i32", "N": "i32", "scale": "fp32"}


def indexer_launches() -> list[tuple[str, dict, tuple[str, ...]]]:
    """The indexer logits as FusedIndexLogits launches them on bf16 queries and keys at
    ``mid`` and ``flash``: decode (1 / 8 queries) at 8k and 128k keys, and 512 queries
    (with their row and key counts marked as a launch specializes them)."""
    from runtime.config import V41Config
    from runtime.kernels.indexer import launch_kwargs
    from runtime.kernels.indexer_tiles import IndexerPolicy

    out = []
    for name in ("mid", "flash"):
        c = V41Config.preset(name)
        for t, n in ((1, 8192), (8, 131072), (512, 8192)):
            tiles = IndexerPolicy().tiling(t, c.index_n_heads, n)
            out.append((f"indexer {name} T={t} N={n} key tiles {tiles.key_tiles}",
                        launch_kwargs(tiles, c.index_n_heads, c.index_head_dim, ieee=False),
                        divisible_by_16(T=t, N=n)))
    return out


ATTENTION_SIGNATURE = {"q_ptr": "*bf16", "pos_ptr": "*i64", "floor_ptr": "*i64", "swa_ptr": "*bf16",
                       "comp_ptr": "*bf16", "topk_ptr": "*i64", "sink_ptr": "*fp32", "out_ptr": "*fp32",
                       "m_ptr": "*fp32", "l_ptr": "*fp32", "swa_scale_ptr": "*bf16", "comp_scale_ptr": "*bf16",
                       "final_ptr": "*fp32", "count_ptr": "*i32", "H": "i32", "W": "i32", "K": "i32",
                       "swa_rows": "i32", "comp_rows": "i32", "keys_per_split": "i32", "n_split": "i32", "scale": "fp32"}
# the row-bound top-k's three launches (runtime/kernels/topk_rowbound.py)
ROW_MAXIMA_SIGNATURE = {"scores_ptr": "*fp32", "maxima_ptr": "*i32", "finite_ptr": "*i32", "ROW_N": "i32",
                        "CHUNK": "i32"}
_ROW_LISTS = {"gt_key_ptr": "*i32", "gt_id_ptr": "*i32", "gt_count_ptr": "*i32", "tie_id_ptr": "*i32",
              "tie_count_ptr": "*i32"}
ROW_CANDIDATES_SIGNATURE = {"scores_ptr": "*fp32", "maxima_ptr": "*i32", "finite_ptr": "*i32", "row_ptr": "*i32",
                            **_ROW_LISTS, "ROW_N": "i32", "CHUNK": "i32", "K": "i32", "CAP": "i32", "TIE_CAP": "i32"}
ROW_SELECT_SIGNATURE = {"scores_ptr": "*fp32", "row_ptr": "*i32", **_ROW_LISTS,
                        "out_ptr": "*i64", "ROW_N": "i32", "CHUNKS": "i32", "K": "i32", "CAP": "i32", "TIE_CAP": "i32"}

MERGE_SIGNATURE = {"part_ptr": "*fp32", "m_ptr": "*fp32", "l_ptr": "*fp32", "sink_ptr": "*fp32",
                   "out_ptr": "*fp32", "H": "i32", "n_split": "i32"}


TABLE_WINDOW, TABLE_TOPK = 128, 512  # the keys of the table's benchmark shapes (W=128, top-k 512)


def table_launch(tile, queries: int, heads: int, ring: bool, float32: bool) -> dict:
    """The partial kernel's keywords for ``tile`` at ``queries`` queries of ``heads`` heads
    (head dim 512, top-k ids; ``ring``: packed ring caches, else loaded engine ones), as
    ``_run`` launches it on CUDA: its splits planned over the benchmark shapes' keys."""
    from runtime.kernels import attention

    n_split = attention.split_plan(TABLE_WINDOW + TABLE_TOPK, tile.splits_for(queries, heads),
                                   tile.keys_per_tile(float32))[1]
    return attention.partial_launch(tile, heads=heads, hd=512, ring=ring, packed=ring, ieee=float32, has_topk=True,
                                    n_split=n_split, on_cuda=True)


def table_launches(float32: bool) -> list[tuple[str, object, dict, dict]]:
    """Attention's partial kernel as the tile table launches it at head dim 512 for ``mid``
    and ``flash`` heads: bf16 engine caches (or float32 ones, IEEE dots, with the row's
    float32 keys per tile) at every query bucket, and packed ring caches with bf16 (float32)
    queries at every bucket by PACKED_TILES; each distinct launch once. The keywords are
    the runtime's own (``attention.partial_launch``, as ``_run`` calls it on CUDA with top-k
    ids), so what compiles here is what a CUDA launch would run."""
    from runtime.config import V41Config
    from runtime.kernels import attention
    from runtime.kernels.attention_tiles import PREFILL, T_BUCKETS, tile_for
    from runtime.kernels.backend import jit

    partial = jit(attention._attn_partial_kernel, helpers=attention.PARTIAL_HELPERS)
    loaded = {k: ("*fp32" if float32 and v == "*bf16" else v) for k, v in ATTENTION_SIGNATURE.items()}
    packed = {**loaded, "swa_ptr": "*u8", "comp_ptr": "*u8", "swa_scale_ptr": "*u8", "comp_scale_ptr": "*u8"}
    out, seen = [], set()
    for name in ("mid", "flash"):
        heads = V41Config.preset(name).num_attention_heads
        for bucket in (*T_BUCKETS, PREFILL):
            queries = f"T<={bucket}" if bucket else "prefill"
            for layout in ("engine", "packed ring"):
                ring = layout != "engine"
                tile = tile_for(bucket or 4096, 512, packed=ring, heads=heads)
                kwargs = table_launch(tile, bucket or 4096, heads, ring, float32)
                key = tuple(sorted(kwargs.items()))
                if key not in seen:
                    seen.add(key)
                    dtype = " float32" if float32 else ""
                    out.append((f"attention {name} {queries} {layout}{dtype} {tile.label()}", partial,
                                packed if kwargs["PACKED"] else loaded, kwargs))
    return out


SM90_SHARED_BYTES = 232_448  # the most shared memory one program may take on an H100 / H200 (227 KiB)


def table_shared_memory() -> int:
    """Compile every table launch in bf16 and float32 and print each one's shared memory
    (compiled metadata: what the launch asks for); a launch over sm_90's limit is an
    error, since it compiles but cannot launch. Returns the number of errors."""
    failed = 0
    for name, kernel, signature, kwargs in table_launches(False) + table_launches(True):
        try:
            shared = compile_sm90(kernel, signature, kwargs, ("H", "W", "K")).metadata.shared
        except Exception as e:  # noqa: BLE001 - reported per launch
            failed += 1
            print(f"error {name}: {type(e).__name__}: {str(e)[:500]}")
            continue
        if shared > SM90_SHARED_BYTES:
            failed += 1
            print(f"error {name}: needs {shared} bytes of shared memory, sm_90 allows {SM90_SHARED_BYTES}")
        else:
            print(f"ok {name} | shared {shared}", flush=True)
    return failed


def attention_launches(table: bool) -> list[tuple[str, object, dict, dict]]:
    """Attention's partial kernel on packed ring caches (the 64-query tile), and the tile
    options no table row uses yet: the value split (split and not, the ring layout), the
    merge in column blocks, 64 heads per program on 8 warps (flash's heads) and the 32-head
    prefill tile beside them, flash prefill's row with its top-k ids prefetched (and
    loaded a tile ahead), the packed rows decoding per scale group, and the window and
    top-k slots in two loops.
    ``table``: first, the partial kernel as the tile table launches it at head dim 512 for
    ``mid`` and ``flash`` heads (bf16 engine caches at every query bucket, packed ring
    caches at every bucket by PACKED_TILES)."""
    from runtime.kernels import attention
    from runtime.kernels.attention_tiles import (
        AttentionTile,
        tile_for,
    )
    from runtime.kernels.backend import jit

    partial = jit(attention._attn_partial_kernel, helpers=attention.PARTIAL_HELPERS)
    # the packed rows of 1 and 8 queries before session 31 (PACKED_TILES now has all three
    # switches on other tilings) and TILES' 1-query row before it (now 64-key tiles, split
    # sources), on which the switches' options were first compiled
    packed_1 = AttentionTile(16, 16, num_warps=4, num_stages=3, splits=16, merge_d=64)
    packed_8 = AttentionTile(32, 16, num_warps=4, num_stages=3, splits=16, merge_d=256)
    mid_1 = AttentionTile(16, 32, num_warps=8, num_stages=3, splits=16, merge_d=64)

    packed = {**ATTENTION_SIGNATURE, "swa_ptr": "*u8", "comp_ptr": "*u8", "swa_scale_ptr": "*u8",
              "comp_scale_ptr": "*u8"}
    out = table_launches(float32=False) if table else []
    common = dict(HD=512, BLOCK_H=32, BLOCK_N=32, HAS_TOPK=True, IEEE=False, num_warps=4, num_stages=3)
    if not table:
        out.append(("attention packed ring h32 n32 w4 s3 x4", partial, packed,
                    dict(SPLIT=True, RING=True, PACKED=True, VD=512, **common)))
    return out + [
        ("attention option split value_d 128", partial, ATTENTION_SIGNATURE,
         dict(SPLIT=True, RING=False, PACKED=False, VD=128, **common)),
        ("attention option ring value_d 256", partial, ATTENTION_SIGNATURE,
         dict(SPLIT=False, RING=True, PACKED=False, VD=256, **common)),
        ("attention option merge merge_d 128", jit(attention._attn_merge_kernel, helpers=attention.MERGE_HELPERS),
         MERGE_SIGNATURE,
         dict(HD=512, SPLITS_P2=16, MERGE_D=128)),
    ] + [  # all 64 of flash's heads in one program: wgmma's 64 rows (mma.sync below them), and the
        # 32-head prefill tile that flash used before its wide rows (runtime/kernels/attention_tiles.py)
        (f"attention option flash h{block_h} n{block_n} w{warps} s3", partial,
         ATTENTION_SIGNATURE, dict(common, BLOCK_H=block_h, BLOCK_N=block_n, num_warps=warps, SPLIT=False, RING=False,
                                   PACKED=False, VD=512))
        for block_h, block_n, warps in ((64, 16, 8), (64, 32, 8), (32, 32, 4))
    ] + [  # flash prefill's row with the top-k ids prefetched into L1 first (AttentionTile.prefetch_ids)
        ("attention option flash h64 n32 w8 s2 prefetch ids", partial, ATTENTION_SIGNATURE,
         dict(common, BLOCK_H=64, BLOCK_N=32, num_warps=8, num_stages=2, SPLIT=False, RING=False, PACKED=False, VD=512,
              PREFETCH_IDS=True)),
        # and with each tile's ids loaded one iteration ahead, on 3 stages (AttentionTile.ids_ahead)
        ("attention option flash h64 n32 w8 s3 prefetch ids, ids ahead", partial,
         ATTENTION_SIGNATURE, dict(common, BLOCK_H=64, BLOCK_N=32, num_warps=8, num_stages=3, SPLIT=False, RING=False,
                                   PACKED=False, VD=512, PREFETCH_IDS=True, IDS_AHEAD=True)),
    ] + [  # the packed decode's switches (AttentionTile.group_decode, split_sources: the window's and
        # the top-k's slots in two loops, decode_once): the group decode on the packed rows of 1 and
        # 8 queries, each switch on the 1-query row alone and combined, all three on the 8-query row
        # and on 16 heads x 32 keys, 8 warps
        (f"attention option packed ring {tile.label()} " + ", ".join(name for name, on in (
            ("group decode", group), ("split sources", split), ("decode once", once)) if on), partial, packed,
         dict(HD=512, BLOCK_H=tile.block_h, BLOCK_N=tile.block_n, SPLIT=True, HAS_TOPK=True, RING=True, IEEE=False,
              PACKED=True, VD=512, num_warps=tile.num_warps, num_stages=tile.num_stages, GROUP_DECODE=group,
              SPLIT_SOURCES=split, DECODE_ONCE=once))
        for tile, group, split, once in (
            (packed_1, True, False, False),
            (packed_8, True, False, False),
            *((packed_1, *switches) for switches in ((False, True, False), (True, True, False),
                                                     (False, False, True), (True, False, True),
                                                     (True, True, True))),
            (packed_8, True, True, True),
            (AttentionTile(16, 32, num_warps=8, num_stages=3, splits=16), True, True, True))
    ] + [
        (f"attention option mid T<={bucket} engine {tile.label()} split sources", partial, ATTENTION_SIGNATURE,
         dict(HD=512, BLOCK_H=tile.heads_per_program(16), BLOCK_N=tile.block_n, SPLIT=tile.splits > 1,
              HAS_TOPK=True, RING=False, IEEE=False, PACKED=False, VD=512, num_warps=tile.num_warps,
              num_stages=tile.num_stages, PREFETCH_IDS=tile.prefetch_ids, IDS_AHEAD=tile.ids_ahead,
              SPLIT_SOURCES=True))
        for bucket, tile in ((1, mid_1), (64, replace(tile_for(64, 512, heads=16), split_sources=False)))
    ] + merge_tail_launches(partial, packed)


def merge_tail_launches(partial, packed_signature: dict) -> list[tuple[str, object, dict, dict]]:
    """The 64-query rows with the merge in the partial launch's last program
    (AttentionTile.merge_tail, which needs no merge columns): mid's engine and packed ring
    rows and flash's engine row."""
    from runtime.kernels.attention_tiles import tile_for

    out = []
    for name, heads, ring in (("mid", 16, False), ("mid", 16, True), ("flash", 64, False)):
        tile = replace(tile_for(64, 512, packed=ring, heads=heads), merge_d=0, merge_tail=True)
        layout = "packed ring" if ring else "engine"
        out.append((f"attention option {name} T<=64 {layout} {tile.label()}", partial,
                    packed_signature if ring else ATTENTION_SIGNATURE, table_launch(tile, 64, heads, ring, False)))
    return out


OPCODES = ("HMMA", "HGMMA", "SHFL", "BAR", "LDG", "STG", "LDS", "STS", "LDL", "STL", "MUFU", "CCTL")  # CCTL: prefetches
_INSTRUCTION = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(\S.*?)\s*;")


def parse_resources(text: str) -> dict:
    """Registers, stack and static shared bytes from ``cuobjdump -res-usage`` (one kernel)."""
    found = {key: re.search(rf"\b{key}:(\d+)", text) for key in ("REG", "STACK", "SHARED")}
    missing = [key for key, match in found.items() if match is None]
    if missing:
        raise ValueError(f"cuobjdump -res-usage: no {', '.join(missing)} in {text[:200]!r}")
    return {"registers": int(found["REG"].group(1)), "stack_bytes": int(found["STACK"].group(1)),
            "shared_bytes": int(found["SHARED"].group(1))}


def parse_sass(text: str) -> dict:
    """SASS instructions (NOP padding left out), counts of ``OPCODES`` and the loop bodies'
    sizes from ``cuobjdump -sass``; an opcode counts by its base name (``SHFL.BFLY`` is
    SHFL), after any predicate (``@!P0``). ``loops``: per innermost loop, in address
    order, the instructions from a backward branch's target to the branch (a loop body as
    one iteration runs it, less what its predicates skip): the static cost of one tile of
    a tile loop, which the whole kernel's count hides when a variant has two loops."""
    counts = dict.fromkeys(OPCODES, 0)
    kept: list[tuple[int, str, str]] = []  # (address, opcode, operands) of every instruction but NOPs
    for line in text.splitlines():
        match = _INSTRUCTION.match(line)
        if not match:
            continue
        words = match.group(2).split()
        opcode = (words[1] if words[0].startswith("@") and len(words) > 1 else words[0]).split(".")[0]
        if opcode == "NOP":
            continue
        kept.append((int(match.group(1), 16), opcode, match.group(2)))
        if opcode in counts:
            counts[opcode] += 1
    spans = []
    for address, opcode, text_ in kept:
        target = re.search(r"\bBRA\s+(?:`\()?0x([0-9a-f]+)", text_) if opcode == "BRA" else None
        if target and int(target.group(1), 16) < address:
            spans.append((int(target.group(1), 16), address))
    innermost = [(lo, hi) for lo, hi in spans if not any(lo <= a < b <= hi and (a, b) != (lo, hi) for a, b in spans)]
    loops = [sum(1 for address, _, _ in kept if lo <= address <= hi) for lo, hi in sorted(innermost)]
    return {"instructions": len(kept), **counts, "loops": loops}


_LOC_DEF = re.compile(r"^(#loc\d*) = loc\((.*)\)\s*$")
_OP_AT = re.compile(r'^\s*(?:%[^=]*= )?"?([a-z_]+\.[a-z_.]+)\b.*\sloc\((#loc\d+)\)\s*$')
_RESULT_TENSOR = re.compile(r"tensor<([^,>]*), (#[\w.]+(?:<\{[^}]*\}>)?)>")
_LAYOUT_OPS = ("ttg.convert_layout", "ttg.local_", "ttg.async_", "ttg.memdesc", "scf.", "arith.constant", "tt.return",
               "tt.splat", "tt.broadcast", "tt.expand_dims", "tt.make_range")  # not computations on data


def layout_copies(ttgir: str, min_elements: int = 2048) -> list[str]:
    """Where Triton computes one source operation in more than one register layout: each
    op (not a layout conversion, a shared-memory step or a shape op: splat, broadcast,
    expand_dims, make_range, which index and mask tensors shared by two uses repeat) on a
    tensor (not of predicates) of at least ``min_elements`` whose source location (the same
    call path) and shape appear with two or more result layouts, as "file:line xN" of its
    innermost location, sorted. Why: the layout
    pass copies a cheap-looking chain into each consumer's layout rather than convert its
    result once (attention's packed decode was computed once per product, one copy
    replicated across warps: ``AttentionTile.decode_once``); a copy costs its whole
    chain again per tile, and nothing else in the static counts points at it."""
    places = {}
    for line in ttgir.splitlines():
        match = _LOC_DEF.match(line)
        if match:
            places[match.group(1)] = match.group(2)

    def innermost(name: str) -> str:
        body = places.get(name, "")
        inner = re.match(r'(?:callsite\(|"[^"]*"\()(#loc\d*)', body)
        if inner:
            return innermost(inner.group(1))
        found = re.match(r'"([^"]+)":(\d+)', body)
        return f"{found.group(1).rsplit('/', 1)[-1]}:{found.group(2)}" if found else "unknown"

    layouts: dict[tuple[str, str, str], set[str]] = {}  # (op, location, shape) -> result layouts
    for line in ttgir.splitlines():
        match = _OP_AT.match(line)
        if not match or match.group(1).startswith(_LAYOUT_OPS) or " : " not in line:
            continue
        tensors = _RESULT_TENSOR.findall(line.rsplit(" : ", 1)[1])
        if not tensors:
            continue
        shape, layout = tensors[-1]
        if shape.endswith("xi1"):  # predicates (a pipelined loop's per-operand masks): no data work
            continue
        elements = 1
        for size in re.findall(r"(\d+)x", shape):
            elements *= int(size)
        if elements >= min_elements:
            layouts.setdefault((match.group(1), match.group(2), shape), set()).add(layout)
    counts: dict[str, int] = {}
    for (_, loc, _), seen in layouts.items():
        if len(seen) > 1:
            place = innermost(loc)
            counts[place] = max(counts.get(place, 0), len(seen))
    return sorted(f"{place} x{n}" for place, n in counts.items())


def sass_resources(compiled) -> dict:
    """A compiled kernel's static resources (``parse_resources`` and ``parse_sass``) and its
    ``layout_copies``."""
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        usage = subprocess.run([str(tool), "-res-usage", str(cubin)], capture_output=True, text=True, check=True)
        sass = subprocess.run([str(tool), "-sass", str(cubin)], capture_output=True, text=True, check=True)
    return {**parse_resources(usage.stdout), **parse_sass(sass.stdout),
            "layout_copies": layout_copies(compiled.asm["ttgir"])}


def all_launches(cases: list[tuple[int, int]], attention_table: bool = False
                 ) -> list[tuple[str, object, dict, dict, tuple[str, ...]]]:
    """(name, kernel, signature, keyword arguments, integer multiples of 16) of every launch
    the check compiles, for these (rows, hidden size) mHC cases (``attention_table``: with
    attention's tile-table launches)."""
    from runtime.kernels import gate, indexer, mhc, rope_quant
    from runtime.kernels.backend import jit

    site_kernel = jit(mhc._mhc_site_kernel, helpers=mhc.SITE_HELPERS)
    launches = [(name, site_kernel, BF16X3_SITE_SIGNATURE if kwargs["PROJ"] == "bf16x3" else SITE_SIGNATURE,
                 kwargs, multiples) for case in cases
                for name, kwargs, multiples in site_launches(*case) + finish_candidate_launches(*case)
                + sweep_candidate_launches(*case) + bf16x3_sweep_launches(*case) + per_tile_sweep_launches(*case)
                + apart_launches(*case)]
    launches += [(name, rope_quant._rope_quant_kernel, signature, kwargs, multiples)
                 for name, signature, kwargs, multiples in rope_quant_launches()]
    gate_kernel = jit(gate._gate_kernel, helpers=gate.GATE_HELPERS)
    launches += [(name, gate_kernel, signature, kwargs, multiples)
                 for name, signature, kwargs, multiples in gate_launches()]
    launches += [(name, indexer._index_logits_kernel, INDEXER_SIGNATURE, kwargs, multiples)
                 for name, kwargs, multiples in indexer_launches()]
    launches += [(name, kernel, signature, kwargs, ("H", "W", "K") if "W" in signature else ("H",))
                 for name, kernel, signature, kwargs in attention_launches(attention_table)]
    return launches


def as_inductor_emits(kernel, directory: Path):
    """``kernel`` as torch.compile compiles it when a compiled region calls it: Inductor
    writes the kernel's source and the closure of what it calls (the jitted helpers it
    copies, the names from ``triton`` it imports: torch/_inductor/codegen/wrapper.py,
    ``user_defined_triton_kernel_transitive_closure_source_code``) under its own Triton
    imports into a module of its own, and compiles that, not the original function. A name
    the kernel reads from its own module that Inductor neither copies nor imports is
    undefined there (the gate's PDL step was so: session 47). The module is written to
    ``directory`` (Triton reads a kernel's source from its file)."""
    import importlib.util

    from torch._inductor.codegen.triton import TritonKernel
    from torch._inductor.codegen.wrapper import (
        user_defined_triton_kernel_transitive_closure_source_code,
    )

    jitted = kernel if isinstance(kernel, triton.runtime.jit.JITFunction) else triton.jit(kernel)
    name = jitted.fn.__name__
    path = directory / f"inductor_{name}.py"
    path.write_text(TritonKernel.gen_common_triton_imports() + "\n@triton.jit\n"
                    + user_defined_triton_kernel_transitive_closure_source_code(jitted) + "\n")
    spec = importlib.util.spec_from_file_location(f"inductor_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


# the chained and resident top-k kernels' runtime arguments (runtime/kernels/topk.py, topk_resident.py)
CHAINED_SIGNATURE = {"scores_ptr": "*fp32", "cand_key_ptr": "*i32", "cand_id_ptr": "*i32", "out_ptr": "*i64",
                     "out_score_ptr": "*fp32", "id_map_ptr": "*i64", "ROW_N": "i32", "CHUNK": "i32", "K": "i32",
                     "STRIDE": "i32"}
RESIDENT_SIGNATURE = {"scores_ptr": "*fp32", "scratch_ptr": "*i32", "out_ptr": "*i64", "out_score_ptr": "*fp32",
                      "id_map_ptr": "*i64", "cand_ptr": "*i64", "cand_score_ptr": "*fp32", "count_ptr": "*i32",
                      "ROW_N": "i32", "CHUNK": "i32", "K": "i32", "SCRATCH": "i32"}


def pdl_launch_pairs(pdl: bool, at_exit: bool):
    """Each op that launches dependently (runtime/kernels/pdl.py), as (op, (kernel,
    signature, keyword arguments) per launch): the first launch, then the dependent, or a
    middle one that is both (the row-bound top-k's second of three); ``pdl``: the PDL forms;
    ``at_exit``: the two ops with a trigger-at-exit switch only (attention, mHC). Read by
    test_kernels_pdl.py (where each PDL step sits in the PTX) and ``--inductor``."""
    import torch

    from runtime.config import V41Config
    from runtime.kernels import attention, gate, mhc
    from runtime.kernels.backend import jit
    from runtime.kernels.mhc_tiles import MhcPolicy
    from runtime.kernels.topk import CHAINED_HELPERS, _topk_kernel
    from runtime.kernels.topk_resident import RESIDENT_HELPERS, _topk_resident_kernel
    from runtime.kernels.topk_rowbound import (
        ROW_BOUND_HELPERS,
        _row_candidates_kernel,
        _row_maxima_kernel,
        _row_select_kernel,
    )

    flash = V41Config.preset("flash")
    dep = {"launch_pdl": True} if pdl else {}
    common = dict(HD=512, BLOCK_H=16, BLOCK_N=16, HAS_TOPK=True, IEEE=False, RING=False, PACKED=False,
                  VD=512, num_warps=4, num_stages=3)
    partial = jit(attention._attn_partial_kernel, helpers=attention.PARTIAL_HELPERS)
    yield ("attention", (partial, ATTENTION_SIGNATURE,
                         dict(SPLIT=True, PDL=pdl, PDL_AT_EXIT=at_exit, **common)),
           (jit(attention._attn_merge_kernel, helpers=attention.MERGE_HELPERS), MERGE_SIGNATURE,
            dict(HD=512, SPLITS_P2=16, MERGE_D=512, PDL=pdl, **dep)))
    tiles = MhcPolicy().tiling(1, 2048, cuda=True)
    launches = mhc.site_launches(tiles, 1, 2048, True, torch.bfloat16, pdl, at_exit)
    site = jit(mhc._mhc_site_kernel, helpers=mhc.SITE_HELPERS)
    yield ("mhc", (site, SITE_SIGNATURE, launches[0][1]), (site, SITE_SIGNATURE, launches[1][1]))
    if at_exit:
        return
    tiles = gate.GatePolicy(select_from=0).tiling(8, flash.hidden_size, flash.n_routed_experts)
    launches = gate.gate_launches(tiles, 8, flash.hidden_size, flash.n_routed_experts, flash, False, pdl)
    kernel = jit(gate._gate_kernel, helpers=gate.GATE_HELPERS)
    sig = {**GATE_SIGNATURE, "count_ptr": "*i64"}
    yield ("gate", (kernel, sig, launches[0][1]), (kernel, sig, launches[1][1]))
    chained = dict(GROUPS=1024, BLOCK=1024, UNROLL=2, num_warps=8, PDL=pdl)
    kernel = jit(_topk_kernel, helpers=CHAINED_HELPERS)
    yield ("topk chained", (kernel, CHAINED_SIGNATURE, dict(SCORES=True, MAPPED=False, **chained)),
           (kernel, CHAINED_SIGNATURE, dict(SCORES=False, MAPPED=True, **chained, **dep)))
    resident = jit(_topk_resident_kernel, helpers=RESIDENT_HELPERS)
    shape = dict(KEYS=8192, GROUPS=1024, LIST=1024, TICKET=False, CAND_KEYS=1024, CAND_GROUPS=1024,
                 CAND_LIST=1024, num_warps=8, PDL=pdl)
    yield ("topk resident", (resident, RESIDENT_SIGNATURE, dict(SCORES=True, MAPPED=False, **shape)),
           (resident, RESIDENT_SIGNATURE, dict(SCORES=False, MAPPED=True, **shape, **dep)))
    row = dict(KEYS=8192, GROUPS=256, num_warps=8, PDL=pdl)
    yield ("topk row bound", (jit(_row_maxima_kernel, helpers=ROW_BOUND_HELPERS), ROW_MAXIMA_SIGNATURE, row),
           (jit(_row_candidates_kernel, helpers=ROW_BOUND_HELPERS), ROW_CANDIDATES_SIGNATURE,
            dict(CH_P2=16, **row, **dep)),
           (jit(_row_select_kernel, helpers=ROW_BOUND_HELPERS), ROW_SELECT_SIGNATURE,
            dict(CH_P2=16, LOG2_CH=4, LIST=4096, K_P2=512, BLOCK=1024, num_warps=8, PDL=pdl, **dep)))


def pdl_roles(launches: list) -> list[str]:
    """Each launch's role in an op's chain: "first", "middle" (waits, then triggers the
    next), "dependent"."""
    return ["first"] + ["middle"] * (len(launches) - 2) + ["dependent"]


def inductor_launches(directory: Path) -> list[tuple[str, object, dict, dict, tuple[str, ...]]]:
    """Every launch of ``pdl_launch_pairs`` in its PDL form, the kernel as torch.compile
    re-emits it (``as_inductor_emits``; each kernel once), named "inductor <op> <role>"."""
    emitted: dict[int, object] = {}
    out = []
    for op, *launches in pdl_launch_pairs(pdl=True, at_exit=False):
        for role, (kernel, signature, kwargs) in zip(pdl_roles(launches), launches, strict=True):
            if id(kernel) not in emitted:
                emitted[id(kernel)] = as_inductor_emits(kernel, directory)
            out.append((f"inductor {op} {role}", emitted[id(kernel)], signature, kwargs, ()))
    return out


def sass_markdown(rows: list[dict], command: str) -> str:
    lines = ["# Static sm_90 resources of the fused kernels' launches (compiled on a CPU)", "",
             f"- Triton {triton.__version__}; ptxas and cuobjdump from its wheel; no GPU involved.",
             f"- Command: `{command}`",
             "- Registers per thread, stack bytes (spills), static shared bytes, SASS instructions (no NOPs) and "
             "opcode counts of the whole kernel (static: a loop body counts once); loop bodies: the instructions "
             "of each innermost loop, in address order (one iteration's static cost); layout copies: source "
             "lines whose operations (on tensors of >= 2,048 elements) Triton computes in more than one register "
             "layout, with how many (compile_sm90.layout_copies).", "",
             "| launch | registers | stack B | shared B | instructions | loop bodies | layout copies | "
             + " | ".join(OPCODES) + " |",
             "|---|" + "---:|" * 5 + "---|" + "---:|" * len(OPCODES)]
    for row in rows:
        lines.append(f"| {row['launch']} | {row['registers']} | {row['stack_bytes']} | {row['shared_bytes']} | "
                     f"{row['instructions']} | {' / '.join(map(str, row['loops'])) or '-'} | "
                     f"{', '.join(row['layout_copies']) or '-'} | " + " | ".join(str(row[op]) for op in OPCODES) + " |")
    return "\n".join(lines) + "\n"


def pop_option(args: list[str], flag: str) -> str | None:
    """Take ``flag VALUE`` out of ``args`` and return VALUE: None when the flag is absent,
    "" when nothing follows it."""
    if flag not in args:
        return None
    at = args.index(flag)
    value = args[at + 1] if at + 1 < len(args) else ""
    del args[at:at + 2]
    return value


def main(argv: list[str]) -> int:
    args = list(argv)
    sass = "--sass" in args
    out = pop_option(args, "--out")
    if out == "":
        print("compile_sm90: --out needs a directory")
        return 1
    out_dir = None if out is None else Path(out)
    stem = pop_option(args, "--name")
    if stem is not None and not re.fullmatch(r"[\w.-]+", stem):
        print("compile_sm90: --name needs a file stem (letters, digits, '_', '.', '-')")
        return 1
    stem = stem or "sass_static_sm90"
    table = "--attention-table" in args
    args = [a for a in args if a not in ("--sass", "--attention-table")]
    try:
        compile_sm90(one_load_one_store, {"x_ptr": "*fp32"}, {})
    except Exception as e:  # noqa: BLE001 - any failure here means no compiler, not a kernel bug
        print(f"cannot compile for sm_90 here: {type(e).__name__}: {str(e)[:300]}")
        return 2
    if "--table-shared" in args:
        return 1 if table_shared_memory() else 0
    failed, rows = 0, []
    inductor = "--inductor" in args
    if inductor:
        scratch = tempfile.TemporaryDirectory()
        launches = inductor_launches(Path(scratch.name))
    else:
        launches = all_launches([tuple(int(v) for v in a.split(":")) for a in args], table)
    for name, kernel, signature, kwargs, multiples in launches:
        try:
            compiled = compile_sm90(kernel, signature, kwargs, multiples)
        except Exception as e:  # noqa: BLE001 - reported per launch
            failed += 1
            print(f"error {name}: {type(e).__name__}: {str(e)[:2000]}")
            continue
        if inductor:  # the PDL step compiled in: griddepcontrol instructions in its PTX
            print(f"ok {name} | griddepcontrol {compiled.asm['ptx'].count('griddepcontrol.')}")
            continue
        if not sass:
            print(f"ok {name}")
            continue
        rows.append({"launch": name, **sass_resources(compiled)})
        r = rows[-1]
        print(f"ok {name} | registers {r['registers']} stack {r['stack_bytes']} shared {r['shared_bytes']} "
              f"| instructions {r['instructions']} | loops {'/'.join(map(str, r['loops'])) or '-'} | "
              f"copies {','.join(r['layout_copies']).replace(' ', '') or '-'} | "
              + " ".join(f"{op} {r[op]}" for op in OPCODES), flush=True)
    if sass and out_dir is not None:
        command = "python tests/runtime/compile_sm90.py " + " ".join(argv)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / f"{stem}.json").write_text(
            json.dumps({"triton": triton.__version__, "command": command, "launches": rows}, indent=2) + "\n")
        (out_dir / f"{stem}.md").write_text(sass_markdown(rows, command))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
