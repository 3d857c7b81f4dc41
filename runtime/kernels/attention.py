"""Fused sparse attention ("MegaAttention" scope, FlashMLA mega-attention): one online
softmax per query over its SWA window and its top-k compressed entries, gathered straight
from the caches, with the per-head sink in the denominator.

Same signature and math as :func:`runtime.attention.sparse_attention`. The key list of
query t is [window positions p-W+1 .. p (valid iff >= floor and >= 0)] ++ [topk[t] ids
(valid iff >= 0)]. A program owns one query, a block of heads (MQA: all heads share the
keys, so a key tile is read once for the block) and one split of the key list
(flash-decoding); with more than one split a second kernel merges the partial (max, sum,
acc) and adds the sink. Every partial program writes its own (acc, max, sum), even when
none of its keys is valid (acc 0, max -1e30, sum 0), so the scratch buffers are never
filled first: a decode call is two launches (one without splits), nothing else; with the
tile's ``merge_tail`` the partial launch merges too (the last program of each query's head
block, by a ticket: runtime/kernels/tickets.py), so it is one.

Two cache layouts, one kernel (the ``RING`` constexpr):
- the engine's (``__call__``): one request's window KV by position [P, hd] and its global
  entries [N, hd], shared by every query of the call;
- the static decode slab's (``ring``): query b reads its own slot, the window KV as a
  ring [B, W, hd] (position p in row p % W) and the global KV [B, N, hd] by top-k id, so
  the step gathers nothing into a key buffer first (runtime/static/ring_attention.py).

The tiling (heads per program, keys per iteration, warps, stages, splits) comes from the
table in runtime/kernels/attention_tiles.py, which benchmarks/attention_tiles.py sweeps.

Packed caches (``ring`` only, ``RuntimeOptions.kv_storage = "packed"``): the slab's window
ring as e4m3 bytes + ue8m0 scales and its global entries as e2m1 nibble pairs + e4m3
scales (runtime/kv_packing.py); the kernel decodes them with integer bit operations
(also in the interpreter, which cannot compute bf16) into exactly the fake-quantised
values the unpacked caches hold, so the output is bit for bit the same. The engine's
layout keeps the model dtype (its state stores no packed bytes).
"""

from __future__ import annotations

import copy

import torch
import triton.language as tl

from runtime.kernels.attention_tiles import AttentionTile, tile_for
from runtime.kernels.backend import interpret_requested, jit, next_pow2
from runtime.kernels.pdl import dependent_launch, gdc_enter
from runtime.kernels.tickets import TicketCounters
from runtime.kv_packing import PackedKV
from runtime.numerics import Numerics

NEG_BIG = -1.0e30
# PREFETCH_IDS: one L1 prefetch per 128-byte line of ids (16 int64); the result is a dummy
# the kernel drops (inline asm needs one), is_pure=False keeps the prefetch
_PREFETCH_L1: tl.constexpr = tl.constexpr("prefetch.global.L1 [$1]; mov.u32 $0, 0;")
ID_LINES = tl.constexpr(32)  # lines prefetched per step: 512 ids


def _tile_ids(topk_row, js, W, hi):
    """Top-k ids of key slots ``js`` (slot W + i is id i of the row); -1 for a slot inside the
    window or at or past ``hi``."""
    return tl.load(topk_row + (js - W), mask=(~(js < W)) & (js < hi), other=-1)


def _fp8_window_keys(rows, scale_rows, ok, dim, HD: tl.constexpr, BLOCK_N: tl.constexpr,
                     GROUP_DECODE: tl.constexpr):
    """Window keys [BLOCK_N, HD] float32 from e4m3 codes at ``rows`` (pointers to the rows'
    first byte) times 2^(ue8m0 byte - 127) per 32 channels at ``scale_rows``."""
    if GROUP_DECODE:
        # the e4m3 byte converted by the hardware (the same value as the bit decoding below
        # for every byte but NaN's, which no cache holds), times the group's scale, loaded
        # once per 32 channels and broadcast over them
        c8 = tl.load(rows[:, None] + dim[None, :], mask=ok[:, None], other=0)  # [BLOCK_N, HD] u8
        e8 = tl.load(scale_rows[:, None] + tl.arange(0, HD // 32)[None, :], mask=ok[:, None],
                     other=0).to(tl.int32)  # [BLOCK_N, HD / 32]
        s8 = tl.reshape(tl.broadcast_to(((e8 << 23).to(tl.float32, bitcast=True))[:, :, None],
                                        (BLOCK_N, HD // 32, 32)), (BLOCK_N, HD))
        return c8.to(tl.float8e4nv, bitcast=True).to(tl.float32) * s8
    # the signed e4m3 byte times 2^(ue8m0 byte - 127); every product is exact in float32
    c8 = tl.load(rows[:, None] + dim[None, :], mask=ok[:, None], other=0).to(tl.int32)
    e8 = tl.load(scale_rows[:, None] + (dim // 32)[None, :], mask=ok[:, None], other=0).to(tl.int32)
    mag = _e4m3_bits_magnitude(c8)
    return tl.where((c8 & 128) != 0, -mag, mag) * (e8 << 23).to(tl.float32, bitcast=True)


def _nvfp4_global_keys(rows, scale_rows, ok, dim, HD: tl.constexpr, BLOCK_N: tl.constexpr,
                       GROUP_DECODE: tl.constexpr):
    """Global keys [BLOCK_N, HD] float32 from e2m1 nibble pairs at ``rows`` (channel 2i in the
    low nibble of byte i) times an e4m3 scale per 16 channels at ``scale_rows``."""
    if GROUP_DECODE:  # each byte loaded once, its two nibbles decoded and joined side by side
        byte = tl.load(rows[:, None] + tl.arange(0, HD // 2)[None, :], mask=ok[:, None],
                       other=0).to(tl.int32)  # [BLOCK_N, HD / 2]
        e2m1 = tl.reshape(tl.join(_e2m1_bits_value(byte), _e2m1_bits_value(byte >> 4)), (BLOCK_N, HD))
        # the scale converted by the hardware once per 16 channels, broadcast
        cs = tl.load(scale_rows[:, None] + tl.arange(0, HD // 16)[None, :], mask=ok[:, None],
                     other=0)  # [BLOCK_N, HD / 16] u8
        sc = tl.reshape(tl.broadcast_to(cs.to(tl.float8e4nv, bitcast=True).to(tl.float32)[:, :, None],
                                        (BLOCK_N, HD // 16, 16)), (BLOCK_N, HD))
        return e2m1 * sc
    byte = tl.load(rows[:, None] + (dim // 2)[None, :], mask=ok[:, None], other=0).to(tl.int32)
    c4 = (byte >> ((dim % 2) * 4)[None, :]) & 15
    i4 = (c4 & 7).to(tl.float32)
    mag4 = tl.where(i4 < 4.0, i4 * 0.5, tl.where(i4 < 6.0, i4 - 2.0, (i4 - 4.0) * 2.0))
    cs = tl.load(scale_rows[:, None] + (dim // 16)[None, :], mask=ok[:, None], other=0).to(tl.int32)
    sc = _e4m3_bits_magnitude(cs)
    return tl.where((c4 & 8) != 0, -mag4, mag4) * sc


def _e4m3_bits_magnitude(code):
    """|value| of e4m3 codes (int32; exponent bias 7, 3 mantissa bits, exponent 0 is
    m * 2^-9) by integer bit operations, exact in float32; the sign bit is the caller's
    (the NVFP4 scales have none)."""
    ex = (code >> 3) & 15
    return tl.where(ex == 0, (code & 7).to(tl.float32) * 0.001953125,
                    (((ex + 120) << 23) | ((code & 7) << 20)).to(tl.float32, bitcast=True))


def _e2m1_bits_value(code):
    """The e2m1 value of the low 4 bits of ``code`` (sign, exponent e, mantissa m) without a
    comparison: e and m placed as float32's lowest exponent bit pair and first mantissa bit
    make the float 2^(e - 127) (1 + m / 2), or m 2^-127 for e = 0 (a denormal, which
    float32 arithmetic keeps: Triton emits no flush-to-zero), so 2^126 times it is the value,
    exactly: 0, 0.5, 1, 1.5, 2, 3, 4, 6."""
    return (((code & 7) << 22) | ((code & 8) << 28)).to(tl.float32, bitcast=True) * 8.507059173023462e37


def _decoded_once(k, IEEE: tl.constexpr):
    """``k`` through an identity the compiler cannot copy (inline PTX with a side effect), so
    the decoded tile is computed once, in one layout, and converted for each product. Why:
    the key tile is an operand of both products (scores: transposed; values: as is), and
    Triton's layout pass copies a cheap-looking elementwise chain, the whole decode from the
    loaded bytes, into each product's operand layout rather than convert its result; the
    copy for the value product's layout is replicated across warps (sm_90, Triton 3.6: two
    fp8 conversions per loaded tile in the kernel's TTGIR; the window loop of the 1-query
    packed row with ``split_sources`` 1,470 instructions against 628;
    ``AttentionTile.decode_once``)."""
    if IEEE:
        return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [k], dtype=tl.float32, is_pure=False, pack=1)
    return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [k], dtype=k.dtype, is_pure=False, pack=2)


def _tile_keys(js, hi, ids, p_t, floor_t, ring_base, W, swa_base, comp_base, swa_scale_base, comp_scale_base, dim,
               HD: tl.constexpr, BLOCK_N: tl.constexpr, RING: tl.constexpr, PACKED: tl.constexpr,
               GROUP_DECODE: tl.constexpr, WINDOW: tl.constexpr, GLOBAL: tl.constexpr):
    """The key tile of slots ``js`` (those below ``hi``) from the sources the loop reads
    (``WINDOW``, ``GLOBAL``; a slot below W is a window key, W + i top-k id ``ids[i]``):
    (keys [BLOCK_N, HD], their row pointers [BLOCK_N] (unpacked caches; packed: ``js``,
    unused), valid [BLOCK_N])."""
    is_win = js < W
    in_range = js < hi
    if WINDOW:
        pos = p_t - (W - 1) + js
        win_ok = is_win & in_range & (pos >= floor_t) & (pos >= 0)
        if RING:
            win_row = ring_base + js  # < 2W for a window key; other keys' rows are masked off
            win_row = tl.where(win_row >= W, win_row - W, win_row)
        else:
            win_row = pos
        rows_win = swa_base + win_row.to(tl.int64) * HD
        ok = win_ok
    if GLOBAL:
        comp_ok = (~is_win) & in_range & (ids >= 0)
        if WINDOW:
            ok = win_ok | comp_ok
        else:
            ok = comp_ok
    if PACKED:
        if WINDOW:
            k = _fp8_window_keys(rows_win, swa_scale_base + win_row.to(tl.int64) * (HD // 32), win_ok, dim,
                                 HD, BLOCK_N, GROUP_DECODE)
        if GLOBAL:
            crow = ids.to(tl.int64)
            k_glob = _nvfp4_global_keys(comp_base + crow * (HD // 2), comp_scale_base + crow * (HD // 16), comp_ok,
                                        dim, HD, BLOCK_N, GROUP_DECODE)
            if WINDOW:
                k = tl.where(is_win[:, None], k, k_glob)
            else:
                k = k_glob
        kp = js
    else:
        if WINDOW:
            kp = rows_win
            if GLOBAL:
                kp = tl.where(is_win, rows_win, comp_base + ids.to(tl.int64) * HD)  # [BLOCK_N] row pointers
        else:
            kp = comp_base + ids.to(tl.int64) * HD
        k = tl.load(kp[:, None] + dim[None, :], mask=ok[:, None], other=0.0)  # [BLOCK_N, HD]
    return k, kp, ok


def _online_softmax_step(q, k, v, ok, m_i, l_i, acc, scale, IEEE: tl.constexpr):
    """One key tile into the running (max [BLOCK_H], sum [BLOCK_H], acc [BLOCK_H, VD])."""
    if IEEE:
        s = tl.dot(q, tl.trans(k.to(tl.float32)), input_precision="ieee")
    else:
        s = tl.dot(q, tl.trans(k))
    s = tl.where(ok[None, :], s * scale, float("-inf"))  # [BLOCK_H, BLOCK_N]
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    alpha = tl.exp(m_i - m_new)
    p = tl.exp(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, axis=1)
    if IEEE:
        acc = acc * alpha[:, None] + tl.dot(p, v.to(tl.float32), input_precision="ieee")
    else:
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
    return m_new, l_i, acc


def _attend_keys(lo, hi, q, m_i, l_i, acc, topk_row, p_t, floor_t, ring_base, W, swa_base, comp_base,
                 swa_scale_base, comp_scale_base, dim, vdim, scale,
                 HD: tl.constexpr, VD: tl.constexpr, BLOCK_N: tl.constexpr, RING: tl.constexpr,
                 PACKED: tl.constexpr, GROUP_DECODE: tl.constexpr, IEEE: tl.constexpr, IDS_AHEAD: tl.constexpr,
                 DECODE_ONCE: tl.constexpr, WINDOW: tl.constexpr, GLOBAL: tl.constexpr):
    """Key slots [lo, hi), BLOCK_N per iteration, from the sources the loop reads
    (``WINDOW``: positions by slot; ``GLOBAL``: entries by top-k id), into the running
    softmax state, which it returns."""
    if GLOBAL and IDS_AHEAD:  # the first tile's ids; each iteration then loads the next tile's
        ids_next = _tile_ids(topk_row, lo + tl.arange(0, BLOCK_N), W, hi)
    for j0 in range(lo, hi, BLOCK_N):
        js = j0 + tl.arange(0, BLOCK_N)
        if GLOBAL:
            if IDS_AHEAD:
                ids = ids_next
                ids_next = _tile_ids(topk_row, js + BLOCK_N, W, hi)
            else:
                ids = _tile_ids(topk_row, js, W, hi)
        else:
            ids = js  # unused
        k, kp, ok = _tile_keys(js, hi, ids, p_t, floor_t, ring_base, W, swa_base, comp_base, swa_scale_base,
                               comp_scale_base, dim, HD, BLOCK_N, RING, PACKED, GROUP_DECODE, WINDOW, GLOBAL)
        if PACKED and not IEEE:
            k = k.to(q.dtype)  # exact: every packed value is a bf16 value
        if DECODE_ONCE:
            k = _decoded_once(k, IEEE)
        if VD == HD:
            v = k  # MQA: the values are the keys
        else:  # this program's value columns, read again (L1 / L2: the same rows)
            v = tl.load(kp[:, None] + vdim[None, :], mask=ok[:, None], other=0.0)  # [BLOCK_N, VD]
        m_i, l_i, acc = _online_softmax_step(q, k, v, ok, m_i, l_i, acc, scale, IEEE)
    return m_i, l_i, acc


def _merge_tail(part_ptr, m_ptr, l_ptr, sink_ptr, final_ptr, t, heads, h_ok, H, n_split,
                HD: tl.constexpr, BLOCK_H: tl.constexpr, SPLITS_P2: tl.constexpr, TAIL_D: tl.constexpr):
    """The merge of ``_attn_merge_kernel`` for one query's block of heads, run by the
    (query, head block)'s last partial program: the splits' (max, sum) [BLOCK_H, splits]
    rescaled to the common max with the sink's, then the partial accumulators summed in
    split order (whichever program finished last, the same sum) TAIL_D columns at a time
    (registers: [BLOCK_H, TAIL_D] floats), every split's load unrolled so all are in
    flight at once. Splits past ``n_split`` load nothing and add exact zeros."""
    rows = t * H + heads  # [BLOCK_H]
    sp = tl.arange(0, SPLITS_P2)
    ok = h_ok[:, None] & (sp < n_split)[None, :]
    m = tl.load(m_ptr + rows[:, None] * n_split + sp[None, :], mask=ok, other=-1.0e30)  # [BLOCK_H, SPLITS_P2]
    l_part = tl.load(l_ptr + rows[:, None] * n_split + sp[None, :], mask=ok, other=0.0)
    sink = tl.load(sink_ptr + heads, mask=h_ok, other=0.0).to(tl.float32)
    top = tl.maximum(tl.max(m, axis=1), sink)  # [BLOCK_H]
    denom = tl.sum(tl.exp(m - top[:, None]) * l_part, axis=1) + tl.exp(sink - top)
    for c in tl.static_range(0, HD, TAIL_D):
        cols = c + tl.arange(0, TAIL_D)
        o = tl.zeros((BLOCK_H, TAIL_D), dtype=tl.float32)
        for s in tl.static_range(SPLITS_P2):
            s_ok = h_ok & (tl.full((BLOCK_H,), s, tl.int32) < n_split)
            f = tl.exp(tl.load(m_ptr + rows * n_split + s, mask=s_ok, other=-1.0e30) - top)  # [BLOCK_H]
            acc = tl.load(part_ptr + (rows[:, None] * n_split + s) * HD + cols[None, :], mask=s_ok[:, None],
                          other=0.0)
            o += f[:, None] * acc
        tl.store(final_ptr + rows[:, None] * HD + cols[None, :], o / denom[:, None], mask=h_ok[:, None])


def _attn_partial_kernel(
    q_ptr, pos_ptr, floor_ptr, swa_ptr, comp_ptr, topk_ptr, sink_ptr,
    out_ptr, m_ptr, l_ptr, swa_scale_ptr, comp_scale_ptr, final_ptr, count_ptr,
    H, W, K, swa_rows, comp_rows, keys_per_split, n_split, scale,
    HD: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT: tl.constexpr,
    HAS_TOPK: tl.constexpr, RING: tl.constexpr, IEEE: tl.constexpr, PACKED: tl.constexpr, VD: tl.constexpr,
    PDL: tl.constexpr = False, PDL_AT_EXIT: tl.constexpr = False, PREFETCH_IDS: tl.constexpr = False,
    IDS_AHEAD: tl.constexpr = False, GROUP_DECODE: tl.constexpr = False, SPLIT_SOURCES: tl.constexpr = False,
    DECODE_ONCE: tl.constexpr = False, MERGE_TAIL: tl.constexpr = False, SPLITS_P2: tl.constexpr = 1,
    TAIL_D: tl.constexpr = 16,
):
    """``swa_rows`` / ``comp_rows``: rows of query t's own window / global source (0: one
    source shared by all queries, the engine's layout). PACKED: ``swa_ptr`` / ``comp_ptr``
    hold e4m3 codes [.., HD] / e2m1 nibble pairs [.., HD/2], ``swa_scale_ptr`` /
    ``comp_scale_ptr`` their ue8m0 [.., HD/32] / e4m3 [.., HD/16] scales
    (runtime/kv_packing.py), decoded here with integer bit operations. ``VD``: the value
    columns this program accumulates (HD: all; less: the grid's third axis is splits x
    HD / VD, every program of a split computes the same scores and accumulates its own
    column block, so the [BLOCK_H, VD] accumulator holds HD / VD times fewer registers;
    unpacked caches only). ``PDL``: the merge is launched dependent on this launch
    (runtime/kernels/pdl.py), and may be placed on the GPU from this program's start
    (``PDL_AT_EXIT``: from its exit). ``PREFETCH_IDS`` (CUDA only: inline PTX): before
    the loop, every line of top-k ids this split will read is prefetched into L1
    (``AttentionTile.prefetch_ids`` says why). ``IDS_AHEAD``: each iteration loads the next
    tile's ids and keys its own from the ids the previous one loaded (``AttentionTile.ids_ahead``
    says why); the same ids, so the same output bit for bit. ``GROUP_DECODE`` (PACKED): each
    scale loaded and decoded once per group of channels and broadcast over it, e4m3 bytes
    converted by the hardware, each NVFP4 byte loaded once for its two channels
    (``AttentionTile.group_decode`` says why); the same values bit for bit.
    ``SPLIT_SOURCES``: the split's window slots in one loop and its top-k slots in a second,
    each tile reading (and, packed, decoding) one source (``AttentionTile.split_sources``
    says why); where W is a multiple of BLOCK_N the tiles are the same, so the output is the
    same bit for bit. ``DECODE_ONCE`` (PACKED; CUDA only: inline PTX): the decoded key tile
    passes an identity the compiler cannot copy, so it is decoded once for both products
    (``_decoded_once`` says why); the same values. ``MERGE_TAIL`` (SPLIT): no merge launch;
    each program takes a ticket on its (query, head block)'s counter in ``count_ptr`` after
    writing its partial, and the one that takes the last merges every split into
    ``final_ptr`` (``_merge_tail``; ``AttentionTile.merge_tail`` says why)."""
    if PDL:
        gdc_enter(False, PDL_AT_EXIT)
    # an eager launch passes Python floats as fp32, inductor's (torch.compile) as fp64: pin fp32
    scale = tl.cast(scale, tl.float32)
    t = tl.program_id(0).to(tl.int64)
    hb = tl.program_id(1)
    tl.static_assert(VD == HD or not PACKED, "packed caches decode every column once: no value split")
    tl.static_assert(PACKED or not DECODE_ONCE, "decode once: packed caches only (loaded keys are not decoded)")
    V_BLOCKS: tl.constexpr = HD // VD
    split = tl.program_id(2) // V_BLOCKS
    vb = tl.program_id(2) % V_BLOCKS
    vdim = vb * VD + tl.arange(0, VD)
    heads = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = heads < H
    dim = tl.arange(0, HD)
    q = tl.load(q_ptr + (t * H + heads[:, None]) * HD + dim[None, :], mask=h_ok[:, None], other=0.0)
    if IEEE:
        q = q.to(tl.float32)
    p_t = tl.load(pos_ptr + t)
    floor_t = tl.load(floor_ptr + t)
    ring_base = 0
    if RING:
        # window key j (position p_t - (W - 1) + j) sits in ring row (p_t + 1 + j) mod W: one
        # modulo per program here, then an add and a wrap per key (an int64 modulo per key
        # took 867 more instructions of the 1-query tile on sm_90, Triton 3.6)
        ring_base = ((p_t + 1) % W).to(tl.int32)
    swa_base = swa_ptr + t * swa_rows * HD
    topk_row = topk_ptr + t * K
    if PACKED:
        comp_base = comp_ptr + t * comp_rows * (HD // 2)
        swa_scale_base = swa_scale_ptr + t * swa_rows * (HD // 32)
        comp_scale_base = comp_scale_ptr + t * comp_rows * (HD // 16)
    else:
        comp_base = comp_ptr + t * comp_rows * HD
        swa_scale_base = swa_scale_ptr
        comp_scale_base = comp_scale_ptr
    n_keys = W + K
    start = split * keys_per_split
    end = tl.minimum(start + keys_per_split, n_keys)
    if HAS_TOPK and PREFETCH_IDS:
        first = tl.maximum(start - W, 0)  # this split's top-k slots [first, last]
        last = tl.minimum(end - W, K) - 1
        for s0 in range(first, last + 1, 16 * ID_LINES):
            lines = tl.minimum(s0 + 16 * tl.arange(0, ID_LINES), last)  # past the end: the last line again
            tl.inline_asm_elementwise(_PREFETCH_L1, "=r,l", [topk_row + lines], dtype=tl.int32,
                                      is_pure=False, pack=1)
    if SPLIT:
        m_i = tl.full((BLOCK_H,), -1.0e30, dtype=tl.float32)
        l_i = tl.zeros((BLOCK_H,), dtype=tl.float32)
    else:
        m_i = tl.load(sink_ptr + heads, mask=h_ok, other=0.0).to(tl.float32)
        l_i = tl.full((BLOCK_H,), 1.0, dtype=tl.float32)
    acc = tl.zeros((BLOCK_H, VD), dtype=tl.float32)
    if SPLIT_SOURCES and HAS_TOPK:  # the window's slots, then the top-k's: one source per tile
        m_i, l_i, acc = _attend_keys(start, tl.minimum(end, W), q, m_i, l_i, acc, topk_row, p_t, floor_t,
                                     ring_base, W, swa_base, comp_base, swa_scale_base, comp_scale_base, dim,
                                     vdim, scale, HD, VD, BLOCK_N, RING, PACKED, GROUP_DECODE, IEEE, IDS_AHEAD,
                                     DECODE_ONCE, True, False)
        m_i, l_i, acc = _attend_keys(tl.maximum(start, W), end, q, m_i, l_i, acc, topk_row, p_t, floor_t,
                                     ring_base, W, swa_base, comp_base, swa_scale_base, comp_scale_base, dim,
                                     vdim, scale, HD, VD, BLOCK_N, RING, PACKED, GROUP_DECODE, IEEE, IDS_AHEAD,
                                     DECODE_ONCE, False, True)
    else:
        m_i, l_i, acc = _attend_keys(start, end, q, m_i, l_i, acc, topk_row, p_t, floor_t,
                                     ring_base, W, swa_base, comp_base, swa_scale_base, comp_scale_base, dim,
                                     vdim, scale, HD, VD, BLOCK_N, RING, PACKED, GROUP_DECODE, IEEE, IDS_AHEAD,
                                     DECODE_ONCE, True, HAS_TOPK)
    if SPLIT:
        part = (t * H + heads) * n_split + split
        tl.store(out_ptr + part[:, None] * HD + vdim[None, :], acc, mask=h_ok[:, None])
        if vb == 0:  # the same in every column block
            tl.store(m_ptr + part, m_i, mask=h_ok)
            tl.store(l_ptr + part, l_i, mask=h_ok)
        if MERGE_TAIL:
            tl.debug_barrier()  # every thread's partial is written before the ticket releases them
            counter = count_ptr + t * tl.num_programs(1) + hb
            ticket = tl.atomic_add(counter, 1, sem="acq_rel")
            if ticket == tl.num_programs(2) - 1:  # every split's every column block is written
                tl.store(counter, 0)  # all others have taken theirs: reset for the next call
                _merge_tail(out_ptr, m_ptr, l_ptr, sink_ptr, final_ptr, t, heads, h_ok, H, n_split,
                            HD, BLOCK_H, SPLITS_P2, TAIL_D)
    else:
        o = acc / l_i[:, None]
        tl.store(out_ptr + (t * H + heads[:, None]) * HD + vdim[None, :], o, mask=h_ok[:, None])


# the partial kernel's helpers, jitted with it (runtime/kernels/backend.py's ``jit``)
PARTIAL_HELPERS = (_tile_ids, _fp8_window_keys, _e4m3_bits_magnitude, _e2m1_bits_value, _nvfp4_global_keys,
                   _decoded_once, _tile_keys, _online_softmax_step, _attend_keys, _merge_tail, gdc_enter)
MERGE_HELPERS = (gdc_enter,)  # the merge kernel's


def _attn_merge_kernel(
    part_ptr, m_ptr, l_ptr, sink_ptr, out_ptr, H, n_split,
    HD: tl.constexpr, SPLITS_P2: tl.constexpr, MERGE_D: tl.constexpr, PDL: tl.constexpr = False,
):
    """Program (query * head, column block): the splits' partials of MERGE_D head-dim
    columns, rescaled to the common max, summed and divided by the sink-including sum.
    ``PDL``: launched dependent on the partial launch: wait for it before any load."""
    if PDL:
        gdc_enter(True)
    row = tl.program_id(0).to(tl.int64)  # t * H + h
    h = row % H
    sp = tl.arange(0, SPLITS_P2)
    sp_ok = sp < n_split
    dim = tl.program_id(1) * MERGE_D + tl.arange(0, MERGE_D)
    m = tl.load(m_ptr + row * n_split + sp, mask=sp_ok, other=-1.0e30)
    l_part = tl.load(l_ptr + row * n_split + sp, mask=sp_ok, other=0.0)
    sink = tl.load(sink_ptr + h).to(tl.float32)
    top = tl.maximum(tl.max(m, axis=0), sink)
    f = tl.exp(m - top)
    denom = tl.sum(f * l_part, axis=0) + tl.exp(sink - top)
    acc = tl.load(part_ptr + (row * n_split + sp[:, None]) * HD + dim[None, :], mask=sp_ok[:, None], other=0.0)
    o = tl.sum(f[:, None] * acc, axis=0) / denom
    tl.store(out_ptr + row * HD + dim, o)


def split_plan(n_keys: int, splits: int, block_n: int) -> tuple[int, int]:
    """(keys per split, splits launched): ``splits`` asked for, each split a whole number
    of key tiles, and no split past the key list (so none is launched empty)."""
    per_split = -(-n_keys // max(1, splits))
    per_split = max(block_n, -(-per_split // block_n) * block_n)
    return per_split, -(-n_keys // per_split)


def partial_launch(tile: AttentionTile, *, heads: int, hd: int, ring: bool, packed: bool, ieee: bool,
                   has_topk: bool, n_split: int, on_cuda: bool) -> dict:
    """The partial kernel's launch keywords (constexprs and compile options) for ``tile`` at
    ``heads`` heads of head dim ``hd``: one place, so that the runtime's launch
    (``FusedSparseAttention._run``) and the sm_90 compile checks of the tile table
    (tests/runtime/compile_sm90.py) build the same keywords by construction. ``n_split``:
    the splits launched (``split_plan``); ``on_cuda``: a CUDA device and not the
    interpreter (the ids' L1 prefetch and the decode-once path are GPU-only); each switch
    only where it applies (the ids' with top-k, the packed decode's with packed caches, the
    merge tail with more than one split). The tail merges ``TAIL_D`` columns at a time:
    2,048 floats a split for the block of heads (16 heads x 128 columns, 64 x 32)."""
    block_h = tile.heads_per_program(heads)
    tail = tile.merge_tail and n_split > 1
    return dict(HD=hd, BLOCK_H=block_h, BLOCK_N=tile.keys_per_tile(ieee), SPLIT=n_split > 1,
                HAS_TOPK=has_topk, RING=ring, IEEE=ieee, PACKED=packed, VD=tile.value_columns(hd, packed),
                num_warps=tile.num_warps, num_stages=tile.num_stages,
                PREFETCH_IDS=tile.prefetch_ids and has_topk and on_cuda,
                IDS_AHEAD=tile.ids_ahead and has_topk, GROUP_DECODE=tile.group_decode and packed,
                SPLIT_SOURCES=tile.split_sources and has_topk,
                DECODE_ONCE=tile.decode_once and packed and on_cuda, MERGE_TAIL=tail,
                SPLITS_P2=next_pow2(n_split) if tail else 1, TAIL_D=min(hd, max(16, 2048 // block_h)) if tail else 16)


class FusedSparseAttention:
    """Callable with :func:`runtime.attention.sparse_attention`'s signature; ``ring`` is the
    static decode slab's twin."""

    def __init__(self, splits: int | None = None, tile: AttentionTile | None = None,
                 table: dict | None = None, dependent_merge: bool = False, merge_at_exit: bool = False) -> None:
        """``splits`` forces the key-list split count (tests use it to run the merge path on
        CPU); ``tile`` forces one tiling for every call (the sweep's candidates; its splits
        apply on any device); ``table`` replaces runtime.kernels.attention_tiles.TILES;
        ``dependent_merge``: the merge launched dependent on the partials (Hopper's PDL,
        runtime/kernels/pdl.py; CUDA only; off: benchmarks/results/dependent_launch_h200.md
        has it faster at some decode shapes and slower at others); ``merge_at_exit``: the
        partials let it launch as they exit rather than from their start (pdl.py says why)."""
        self.forced_splits = splits
        self.forced_tile = tile
        self.table = table
        self.dependent_merge = dependent_merge
        self.merge_at_exit = merge_at_exit
        self.partial = jit(_attn_partial_kernel, helpers=PARTIAL_HELPERS)
        self.merge = jit(_attn_merge_kernel, helpers=MERGE_HELPERS)
        self.tickets = TicketCounters()  # the merge tail's, one per (query, head block); twins share them

    def with_tile(self, tile: AttentionTile) -> FusedSparseAttention:
        """A twin that forces ``tile`` and shares this one's kernels, so their compiled
        variants are reused (a new instance wraps the kernels again; the sweep times
        hundreds of tilings)."""
        twin = copy.copy(self)
        twin.forced_tile = tile
        return twin

    def __call__(self, q, positions, floor, swa, window: int, compressed, topk, sink,
                 num: Numerics) -> torch.Tensor:
        """q [T, H, hd]; swa [P, hd] by position; compressed [N, hd]; topk [T, K]."""
        if isinstance(swa, PackedKV) or isinstance(compressed, PackedKV):
            raise ValueError("fused attention: packed caches are the static slab's (use ring)")
        return self._run(q, positions, floor, swa, window, compressed, topk, sink, ring=False)

    def ring(self, q, positions, floor, ring, entries, topk, sink) -> torch.Tensor:
        """q [B, H, hd]; ring [B, W, hd] (position p in row p % W); entries [B, N, hd] or
        None (a ratio-0 layer: window only); topk [B, K] ids into entries (-1 = empty)
        -> [B, H, hd] float32. Packed caches (``PackedKV``: an "fp8" ring and "nvfp4"
        entries, both packed or neither) are decoded in the kernel; the output equals the
        same call on their unpacked values bit for bit."""
        b = q.shape[0]
        packed = isinstance(ring, PackedKV)
        if entries is not None and isinstance(entries, PackedKV) != packed:
            raise ValueError("fused ring attention: the ring and the entries must both be packed or neither")
        if packed and (ring.fmt != "fp8" or (entries is not None and entries.fmt != "nvfp4")):
            raise ValueError(f"fused ring attention: packed ring must be fp8 and entries nvfp4, got {ring.fmt} "
                             f"and {None if entries is None else entries.fmt}")
        ring_shape = ring.codes.shape if packed else ring.shape
        entries_shape = None if entries is None else (entries.codes.shape if packed else entries.shape)
        if ring_shape[0] != b or (entries is not None and entries_shape[0] != b):
            raise ValueError(f"fused ring attention: {b} queries but ring {tuple(ring_shape)}, "
                             f"entries {None if entries is None else tuple(entries_shape)}")
        return self._run(q, positions, floor, ring, ring_shape[1], entries, topk, sink, ring=True)

    def _run(self, q, positions, floor, swa, window: int, compressed, topk, sink, ring: bool) -> torch.Tensor:
        t, n_heads, hd = q.shape
        dev = q.device
        out = torch.empty(t, n_heads, hd, dtype=torch.float32, device=dev)
        if t == 0:
            return out
        if hd != next_pow2(hd):
            raise ValueError(f"fused attention: head_dim {hd} must be a power of two")
        has_topk = topk is not None and compressed is not None
        k_width = topk.shape[1] if has_topk else 0
        dtype = q.dtype
        packed = isinstance(swa, PackedKV)
        if packed:
            swa, swa_scales = swa.codes.contiguous(), swa.scales.contiguous()
            comp, comp_scales = ((compressed.codes.contiguous(), compressed.scales.contiguous()) if has_topk
                                 else (swa, swa_scales))
            if dtype not in (torch.float32, torch.bfloat16, torch.float16):
                dtype = torch.float32
        else:
            if swa.dtype != dtype or (has_topk and compressed.dtype != dtype):
                dtype = torch.float32
            swa = swa.to(dtype).contiguous()
            comp = compressed.to(dtype).contiguous() if has_topk else swa
            swa_scales = comp_scales = swa
        q = q.to(dtype).contiguous()
        tk = topk.contiguous() if has_topk else positions
        ieee = dtype == torch.float32
        tile = self.forced_tile or tile_for(t, hd, self.table, packed=packed, heads=n_heads)
        splits = tile.splits_for(t, n_heads) if self.forced_tile is not None or dev.type == "cuda" else 1
        if self.forced_splits is not None:
            splits = self.forced_splits
        per_split, n_split = split_plan(window + k_width, splits, tile.keys_per_tile(ieee))
        launch = partial_launch(tile, heads=n_heads, hd=hd, ring=ring, packed=packed, ieee=ieee, has_topk=has_topk,
                                n_split=n_split, on_cuda=dev.type == "cuda" and not interpret_requested())
        h_blocks = -(-n_heads // launch["BLOCK_H"])
        vd = launch["VD"]
        sink_f = sink.float().contiguous()
        pos = positions.long().contiguous()
        flo = floor.long().contiguous()
        swa_rows = window if ring else 0
        comp_rows = comp.shape[1] if ring and has_topk else 0
        scale_ptrs = (swa_scales, comp_scales)
        scalars = (n_heads, window, k_width, swa_rows, comp_rows, per_split, n_split, hd**-0.5)
        if n_split == 1:
            self.partial[(t, h_blocks, hd // vd)](q, pos, flo, swa, comp, tk, sink_f, out, out, out, *scale_ptrs,
                                                  out, out, *scalars, **launch)
            return out
        # No fills: every (query, head, split) slot is written by its partial program.
        part = torch.empty(t, n_heads, n_split, hd, dtype=torch.float32, device=dev)
        m = torch.empty(t, n_heads, n_split, dtype=torch.float32, device=dev)
        lsum = torch.empty(t, n_heads, n_split, dtype=torch.float32, device=dev)
        grid = (t, h_blocks, n_split * (hd // vd))
        if launch["MERGE_TAIL"]:  # the last partial program of each (query, head block) merges: one launch
            counts = self.tickets.get(dev, t * h_blocks)
            self.partial[grid](q, pos, flo, swa, comp, tk, sink_f, part, m, lsum, *scale_ptrs, out, counts,
                               *scalars, **launch)
            return out
        pdl = dependent_launch(self.dependent_merge, dev)
        self.partial[grid](q, pos, flo, swa, comp, tk, sink_f, part, m, lsum, *scale_ptrs, out, out, *scalars,
                           PDL=pdl, PDL_AT_EXIT=self.merge_at_exit, **launch)
        merge_d = tile.merge_columns(hd)
        self.merge[(t * n_heads, hd // merge_d)](part, m, lsum, sink_f, out, n_heads, n_split,
                                                 HD=hd, SPLITS_P2=next_pow2(n_split), MERGE_D=merge_d, PDL=pdl,
                                                 launch_pdl=pdl, num_warps=tile.merge_warps)
        return out
