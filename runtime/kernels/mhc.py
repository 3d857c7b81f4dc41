"""Fused "Mega-mHC" site: the previous sublayer's post (X' = post*out + C^T X), this site's
coefficients (unweighted RMS over 4D, the 24-wide GEMM with ``fn``, sigmoid / 2*sigmoid /
row softmax + Sinkhorn), the collapse with the shifted (previous) pre and the weighted
RMSNorm (DeepGEMM ``mega_mhc``; vLLM #56962).

Same signature and math as :func:`runtime.kernels.reference.mhc_site`, as one kernel
(``_mhc_site_kernel``) on a grid of row blocks (BLOCK_T rows) x D splits, launched once or
twice as ``runtime/kernels/mhc_tiles.py`` decides (it says why, and what the projection
modes are):
- the sweep: each program covers its D range: X' (rounded to the stream dtype, as the
  reference rounds it) is written, the 24 projections accumulate per stream as
  [BLOCK_T, BLOCK_D] x [BLOCK_D, 32] products (``PROJ``), and sum(X'^2), the collapsed row
  and its sum of squares accumulate; it writes those partials per split. With
  ``RELOAD_D`` > 0 the projection is not in the mixing loop: after every ``RELOAD_D``
  columns are mixed and written, a second loop re-reads that X' (from L2) and projects it.
  A dot on the mixing's values made Triton recompute the whole mixing in the tensor-core
  operand's layout, holding every coefficient twice (255 registers and spills in the
  static sm_90 count, 62 instructions per element; re-read: 20 to mix plus 17-30 to
  project with TF32x3, no spills); a plain load is staged for the tensor cores by the
  compiler itself. ``PIN_MIX`` (the default on CUDA) stops the recompute without the
  re-read: X' passes through an identity the compiler may not duplicate, so it is moved
  into the operand's layout instead (mhc_tiles.py has the counts and timings);
- the finish: the partials summed over the splits in split order (deterministic), the
  coefficients (sigmoids, softmax, Sinkhorn) once per row, and the collapsed row
  normalised. Many rows: by the row block's last program in the same launch (a ticket,
  ``runtime/kernels/tickets.py``); decode rows: by a second launch of the same kernel.
  The coefficients are [rows, 4, 4] tensors, or with ``REG_FINISH`` (the decode default)
  one [rows] vector per coefficient, so the Sinkhorn is register arithmetic, and with
  ``FAST_RCP`` its reciprocals skip div.full's range checks (mhc_tiles.py has the timings).

Why split over D: with one program per row block sweeping all of D, decode shapes (one or
a handful of row blocks) left a site to one or a few SMs reading the whole 24 x 4D ``fn``
alone: 0.33 ms per site at ``mid`` with one row, two thirds of a static decode step
(benchmarks/results/decode_h200.md). Without a split (one D range per row block) the float
sums are grouped exactly as in one sweep.
"""

from __future__ import annotations

from dataclasses import replace

import torch
import triton.language as tl
from torch.utils.weak import WeakIdKeyDictionary

from runtime.config import V41Config
from runtime.kernels.backend import interpret_requested, jit
from runtime.kernels.mhc_tiles import INTERPRETED, MhcPolicy, MhcTiling
from runtime.kernels.pdl import dependent_launch, gdc_enter
from runtime.kernels.tickets import TicketCounters
from runtime.mhc import HcMix
from runtime.numerics import Numerics

TL_DTYPES = {torch.float32: tl.float32, torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}
MIX_COLS = 32  # 24 projections padded to a power of two


# The site kernel's PHASE (constexpr globals: compiled Triton reads no other globals).
SWEEP, SWEEP_AND_TAIL, FINISH, PROJECT = tl.constexpr(0), tl.constexpr(1), tl.constexpr(2), tl.constexpr(3)
_PIN_ASM: tl.constexpr = tl.constexpr("mov.b32 $0, $1;")  # PIN_MIX's identity
# FAST_RCP's four reciprocals: what Triton's 1.0 / x (div.full.f32) computes for a sum in
# the normal range, without its range checks and rescaling on the Sinkhorn's serial chain
_RCP4_ASM: tl.constexpr = tl.constexpr(
    "rcp.approx.ftz.f32 $0, $4; rcp.approx.ftz.f32 $1, $5; rcp.approx.ftz.f32 $2, $6; rcp.approx.ftz.f32 $3, $7;")
_RCP4_PINS: tl.constexpr = tl.constexpr("=r,=r,=r,=r,r,r,r,r")


def tf32_split(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 ``x`` as (head, remainder), both exact in TF32, each rounded to nearest (ties
    away from zero, as ``cvt.rna.tf32.f32`` and Triton's TF32x3 split round): head + remainder
    is within 2^-22 |x| of x. The "tf32x2" projection's operands: X' is bf16, so exact in
    TF32, and X' * head + X' * remainder are two TF32 products with nothing dropped that
    TF32x3 keeps. (On the H200 the projection measured 6.1e-6 from a float64 oracle against
    5.0e-7 for TF32x3 while it added every product straight into the running sum; it sums
    each tile from zero first since session 21: mhc_tiles.py.)"""

    def rna(v: torch.Tensor) -> torch.Tensor:
        return ((v.view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)

    head = rna(x)
    return head, rna(x - head)


def bf16_split3(x: torch.Tensor) -> torch.Tensor:
    """float32 ``x`` as three bf16 parts [3, *x.shape] (hi, mid, lo), each the bf16 nearest
    (ties to even) to what the parts before it leave: hi + mid + lo is within 2^-24 |x| of x
    (each remainder is exact in float32). The "bf16x3" projection's ``fn``: X' is bf16, so
    X' * part is exact in float32 and the three products lose nothing of fn but that, as
    bf16 tensor-core products (half the operand bytes of TF32, no split of X' in the
    kernel). Stacked, so the kernel reads the three parts from one pointer."""
    hi = x.bfloat16()
    rest = x - hi.float()
    mid = rest.bfloat16()
    return torch.stack([hi, mid, (rest - mid.float()).bfloat16()])


def capturing() -> bool:
    """Whether the current CUDA stream is capturing a graph (False without CUDA)."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


class WeightSplits:
    """``split`` of each ``fn`` weight, computed once per weight and version (the
    "tf32x2" and "bf16x3" projections' operands: :class:`Tf32Splits`, :class:`Bf16Splits`).

    Why: fn is a weight, the same tensor at every call, and splitting it on every call put
    five elementwise launches on the 24 x 4D float32 weight in front of each "tf32x2" site
    (inside the graphs the sweeps replay). What "tf32x2" measured with and without them:
    runtime/kernels/mhc_tiles.py. Keyed by the tensor's identity (held weakly: a freed
    weight drops its split) and checked against its version counter, so an in-place update
    (a checkpoint loaded into the same tensors) is split again; a graph captured before
    such an update keeps reading the split it captured (capture again after loading, as
    for every weight a graph reads). A split first asked for inside a capture is not kept.
    A caller passing a fresh tensor each call (fn not float32 and contiguous) gets no
    reuse, only the same result."""

    def __init__(self, split) -> None:
        self._split = split
        self._by_weight: WeakIdKeyDictionary = WeakIdKeyDictionary()

    def get(self, fn: torch.Tensor):
        cached = self._by_weight.get(fn)
        if cached is not None and cached[0] == fn._version:
            return cached[1]
        split = self._split(fn)
        if capturing():
            # inside a CUDA-graph capture nothing runs: the split is recorded into the graph
            # (each replay computes it), and kept it would be unwritten memory to an eager
            # call before the first replay
            return split
        self._by_weight[fn] = (fn._version, split)
        return split


class Tf32Splits(WeightSplits):
    """``tf32_split`` (head, remainder) of each fn weight: the "tf32x2" projection's."""

    def __init__(self) -> None:
        super().__init__(tf32_split)


class Bf16Splits(WeightSplits):
    """``bf16_split3`` ([3, 24, 4D] bf16) of each fn weight: the "bf16x3" projection's."""

    def __init__(self) -> None:
        super().__init__(bf16_split3)


def _bf16x3_dot(x, hi, mid, lo, BF16_OPERANDS: tl.constexpr):
    """x @ (hi + mid + lo): [rows, BLOCK_D] bf16-exact float32 X' against the three bf16
    parts of a [BLOCK_D, 32] fn tile, the products summed from zero smallest part first
    and returned for the caller to add to its running sum (as "tf32x2" does; added
    straight into the running sum such products measured 10x further from a float64
    oracle, mhc_tiles.py). ``BF16_OPERANDS``: the tensor cores' bf16 products (CUDA);
    off, the same exact products in float32 (Triton's interpreter runs a bf16 ``dot`` on
    the bits: runtime/kernels/backend.py)."""
    if BF16_OPERANDS:
        a = x.to(tl.bfloat16)
        return tl.dot(a, hi, tl.dot(a, mid, tl.dot(a, lo)))
    lo_part = tl.dot(x, lo.to(tl.float32), input_precision="ieee")
    mid_part = tl.dot(x, mid.to(tl.float32), lo_part, input_precision="ieee")
    return tl.dot(x, hi.to(tl.float32), mid_part, input_precision="ieee")


def _project_columns(src_ptr, fn_ptr, fn_lo_ptr, rows64, r_ok, d_from, d_to, D, m, PROJ: tl.constexpr,
                     BLOCK_D: tl.constexpr, BF16_OPERANDS: tl.constexpr):
    """``m`` ([rows, 32]) plus the 24 projections of columns [d_from, d_to) of each of the
    four streams of ``src_ptr`` ([T, 4, D], X' as stored), against ``fn`` in the ``PROJ``
    mode's layout (``fn_lo_ptr``: "tf32x2"'s remainder; "bf16x3" finds its parts from
    ``fn_ptr``). Shared by the sweep's re-read (``RELOAD_D``) and the projection's own
    launch (``PROJECT``): a plain load of X' is staged for the tensor cores by the compiler."""
    HC: tl.constexpr = 4
    cols = tl.arange(0, 32)
    c_ok = cols < 6 * HC
    width = HC * D
    for d0 in range(d_from, d_to, BLOCK_D):
        ds = d0 + tl.arange(0, BLOCK_D)
        d_ok = ds < D
        ok = r_ok[:, None] & d_ok[None, :]
        base = rows64[:, None] * width + ds[None, :]
        f_ok = d_ok[:, None] & c_ok[None, :]
        fcol = fn_ptr + cols[None, :] * width + ds[:, None]
        for s in tl.static_range(HC):
            a = tl.load(src_ptr + base + s * D, mask=ok, other=0.0).to(tl.float32)
            f = tl.load(fcol + s * D, mask=f_ok, other=0.0)
            if PROJ == "tf32x2":  # fn's TF32 remainder, then its head, summed from zero, then added
                f_lo = tl.load(fn_lo_ptr + cols[None, :] * width + ds[:, None] + s * D, mask=f_ok, other=0.0)
                m += tl.dot(a, f, tl.dot(a, f_lo, input_precision="tf32"), input_precision="tf32")
            elif PROJ == "bf16x3":
                at_part = fcol + s * D + 6 * HC * width
                m += _bf16x3_dot(a, f, tl.load(at_part, mask=f_ok, other=0.0),
                                 tl.load(at_part + 6 * HC * width, mask=f_ok, other=0.0), BF16_OPERANDS)
            else:
                m += tl.dot(a, f, input_precision=PROJ)
    return m


def _mix_coefficients(prev_post_ptr, prev_comb_ptr, rows64, r_ok):
    """The previous sublayer's post (4) and combination (4 x 4, row-major) of each row, as
    [rows, 1] columns: q0..q3, then c00..c33."""
    cb = prev_comb_ptr + rows64 * 16
    pp = prev_post_ptr + rows64 * 4
    return (tl.load(pp + 0, mask=r_ok, other=0.0)[:, None], tl.load(pp + 1, mask=r_ok, other=0.0)[:, None],
            tl.load(pp + 2, mask=r_ok, other=0.0)[:, None], tl.load(pp + 3, mask=r_ok, other=0.0)[:, None],
            tl.load(cb + 0, mask=r_ok, other=0.0)[:, None], tl.load(cb + 1, mask=r_ok, other=0.0)[:, None],
            tl.load(cb + 2, mask=r_ok, other=0.0)[:, None], tl.load(cb + 3, mask=r_ok, other=0.0)[:, None],
            tl.load(cb + 4, mask=r_ok, other=0.0)[:, None], tl.load(cb + 5, mask=r_ok, other=0.0)[:, None],
            tl.load(cb + 6, mask=r_ok, other=0.0)[:, None], tl.load(cb + 7, mask=r_ok, other=0.0)[:, None],
            tl.load(cb + 8, mask=r_ok, other=0.0)[:, None], tl.load(cb + 9, mask=r_ok, other=0.0)[:, None],
            tl.load(cb + 10, mask=r_ok, other=0.0)[:, None], tl.load(cb + 11, mask=r_ok, other=0.0)[:, None],
            tl.load(cb + 12, mask=r_ok, other=0.0)[:, None], tl.load(cb + 13, mask=r_ok, other=0.0)[:, None],
            tl.load(cb + 14, mask=r_ok, other=0.0)[:, None], tl.load(cb + 15, mask=r_ok, other=0.0)[:, None])


def _mhc_site_kernel(
    streams_ptr, out_ptr, prev_post_ptr, prev_comb_ptr, pre_shift_ptr, fn_ptr, fn_lo_ptr, base_ptr, scale_ptr, norm_w_ptr,
    new_streams_ptr, x_ptr, part_ptr, count_ptr, pre_ptr, post_ptr, comb_ptr,
    T, D, SPLIT_D, norm_eps, hc_eps, sinkhorn_iters,
    PHASE: tl.constexpr, HAS_OUT: tl.constexpr, DTYPE: tl.constexpr, BLOCK_T: tl.constexpr,
    BLOCK_D: tl.constexpr, PROJ: tl.constexpr, TAIL_T: tl.constexpr, CHUNK: tl.constexpr,
    NORM_D: tl.constexpr, RELOAD_D: tl.constexpr, REG_FINISH: tl.constexpr,
    PIN_MIX: tl.constexpr, FAST_RCP: tl.constexpr, FMA_MIX: tl.constexpr, PDL: tl.constexpr = False,
    PDL_AT_EXIT: tl.constexpr = False, BF16_OPERANDS: tl.constexpr = False, COEF_IN_LOOP: tl.constexpr = False,
    APART: tl.constexpr = False,
):
    """One launch of a site, by PHASE:

    - SWEEP: program (row block, split) sweeps D range [split * SPLIT_D, (split + 1) * SPLIT_D):
      writes X' and the collapsed row x, and partials [split, T, 34] (32 projection columns,
      sum X'^2, sum x^2);
    - SWEEP_AND_TAIL: the same, then the row block's last program (ticket) finishes it: the
      coefficients, and the normalised rows over all of D;
    - FINISH (a second launch after SWEEP, grid row blocks x (the same splits + 1)): program
      (row block, 0) computes the coefficients and program (row block, s > 0) normalises its
      rows over the sweep's split s - 1, so no program does both one after the other (when
      split 0 did, it set the launch's length: mid, one row, the finish was 4.41 us of a
      6.86-us site on the H200);
    - PROJECT (with ``APART``, between a SWEEP that did not project and the FINISH): program
      (row block, split) projects the sweep's split of X' as stored, writing the partials'
      32 projection columns (the sweep wrote their sums of squares).

    Finishing sums the partials of every split in split order (a fixed tree, whoever came
    last: deterministic), CHUNK splits per load (one memory round trip each, not one per
    split), TAIL_T rows at a time, reading through L2 (.cg: other programs wrote them).
    ``PROJ``: the projection mode (mhc_tiles.PROJECTIONS). ``PDL``: FINISH is launched
    dependent on SWEEP (runtime/kernels/pdl.py): SWEEP lets it launch from the start
    (``PDL_AT_EXIT``: as it exits), FINISH waits for SWEEP before any load.
    ``COEF_IN_LOOP``: SWEEP loads the previous post and combination in every D tile, not
    once before its loop (fewer registers held; the same values, so the same bits).
    ``APART``: SWEEP neither projects nor writes the projection partials (PROJECT does)."""
    if PDL:
        gdc_enter(PHASE == FINISH, PDL_AT_EXIT)
    # an eager launch passes Python floats as fp32, inductor's (torch.compile) as fp64: pin fp32
    norm_eps, hc_eps = tl.cast(norm_eps, tl.float32), tl.cast(hc_eps, tl.float32)
    HC: tl.constexpr = 4
    NCOL: tl.constexpr = 32
    PART: tl.constexpr = 34
    pid = tl.program_id(0)
    split = tl.program_id(1)
    if PHASE != FINISH:  # the sweep's or the projection's row block
        rows = pid * BLOCK_T + tl.arange(0, BLOCK_T)
        r_ok = rows < T
        rows64 = rows.to(tl.int64)
        cols = tl.arange(0, NCOL)
    if PHASE == PROJECT:
        src = new_streams_ptr if HAS_OUT else streams_ptr
        m = _project_columns(src, fn_ptr, fn_lo_ptr, rows64, r_ok, split * SPLIT_D, split * SPLIT_D + SPLIT_D, D,
                             tl.zeros((BLOCK_T, NCOL), dtype=tl.float32), PROJ, BLOCK_D, BF16_OPERANDS)
        part = part_ptr + (split * T + rows64) * PART
        tl.store(part[:, None] + cols[None, :], m, mask=r_ok[:, None])
    if (PHASE == SWEEP) | (PHASE == SWEEP_AND_TAIL):
        c_ok = cols < 6 * HC
        width = HC * D
        p0 = tl.load(pre_shift_ptr + rows64 * HC + 0, mask=r_ok, other=0.0)
        p1 = tl.load(pre_shift_ptr + rows64 * HC + 1, mask=r_ok, other=0.0)
        p2 = tl.load(pre_shift_ptr + rows64 * HC + 2, mask=r_ok, other=0.0)
        p3 = tl.load(pre_shift_ptr + rows64 * HC + 3, mask=r_ok, other=0.0)
        m = tl.zeros((BLOCK_T, NCOL), dtype=tl.float32)
        # the sums of squares per row, summed per tile: a [BLOCK_T, BLOCK_D] accumulator
        # would hold two more tiles of registers per thread through the loop
        sq = tl.zeros((BLOCK_T,), dtype=tl.float32)
        xsq = tl.zeros((BLOCK_T,), dtype=tl.float32)
        if HAS_OUT and not COEF_IN_LOOP:  # the previous sublayer's post and combination, once (not per D tile)
            q0, q1, q2, q3, c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33 = \
                _mix_coefficients(prev_post_ptr, prev_comb_ptr, rows64, r_ok)
        d_lo = split * SPLIT_D
        d_hi = d_lo + SPLIT_D
        for c0 in range(d_lo, d_hi, RELOAD_D if RELOAD_D > 0 else SPLIT_D):
            c_hi = tl.minimum(c0 + RELOAD_D, d_hi) if RELOAD_D > 0 else d_hi
            for d0 in range(c0, c_hi, BLOCK_D):
                ds = d0 + tl.arange(0, BLOCK_D)
                d_ok = ds < D
                ok = r_ok[:, None] & d_ok[None, :]
                base = rows64[:, None] * width + ds[None, :]
                x0 = tl.load(streams_ptr + base + 0 * D, mask=ok, other=0.0).to(tl.float32)
                x1 = tl.load(streams_ptr + base + 1 * D, mask=ok, other=0.0).to(tl.float32)
                x2 = tl.load(streams_ptr + base + 2 * D, mask=ok, other=0.0).to(tl.float32)
                x3 = tl.load(streams_ptr + base + 3 * D, mask=ok, other=0.0).to(tl.float32)
                if HAS_OUT:
                    if COEF_IN_LOOP:  # per tile: not held in registers through the loop
                        q0, q1, q2, q3, c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33 = \
                            _mix_coefficients(prev_post_ptr, prev_comb_ptr, rows64, r_ok)
                    o = tl.load(out_ptr + rows64[:, None] * D + ds[None, :], mask=ok, other=0.0).to(tl.float32)
                    # X'_j = post_j * out + sum_i comb[i, j] * X_i (comb [hc, hc] row-major)
                    if FMA_MIX:  # the same sums in the same order, each product-and-add one rounding
                        y0 = tl.fma(q0, o, tl.fma(c30, x3, tl.fma(c20, x2, tl.fma(c10, x1, c00 * x0))))
                        y1 = tl.fma(q1, o, tl.fma(c31, x3, tl.fma(c21, x2, tl.fma(c11, x1, c01 * x0))))
                        y2 = tl.fma(q2, o, tl.fma(c32, x3, tl.fma(c22, x2, tl.fma(c12, x1, c02 * x0))))
                        y3 = tl.fma(q3, o, tl.fma(c33, x3, tl.fma(c23, x2, tl.fma(c13, x1, c03 * x0))))
                    else:
                        y0 = q0 * o + (c00 * x0 + c10 * x1 + c20 * x2 + c30 * x3)
                        y1 = q1 * o + (c01 * x0 + c11 * x1 + c21 * x2 + c31 * x3)
                        y2 = q2 * o + (c02 * x0 + c12 * x1 + c22 * x2 + c32 * x3)
                        y3 = q3 * o + (c03 * x0 + c13 * x1 + c23 * x2 + c33 * x3)
                    x0 = y0.to(DTYPE).to(tl.float32)
                    x1 = y1.to(DTYPE).to(tl.float32)
                    x2 = y2.to(DTYPE).to(tl.float32)
                    x3 = y3.to(DTYPE).to(tl.float32)
                    if PIN_MIX:
                        # X' computed once: an identity the compiler may not duplicate (not
                        # pure), so the dot's operand is X' moved into the tensor-core layout,
                        # not the mixing recomputed there (sm_90 static count at 4,096 rows:
                        # 1,929 -> 1,523 instructions per loop iteration)
                        x0 = tl.inline_asm_elementwise(_PIN_ASM, "=r,r", [x0], dtype=tl.float32, is_pure=False, pack=1)
                        x1 = tl.inline_asm_elementwise(_PIN_ASM, "=r,r", [x1], dtype=tl.float32, is_pure=False, pack=1)
                        x2 = tl.inline_asm_elementwise(_PIN_ASM, "=r,r", [x2], dtype=tl.float32, is_pure=False, pack=1)
                        x3 = tl.inline_asm_elementwise(_PIN_ASM, "=r,r", [x3], dtype=tl.float32, is_pure=False, pack=1)
                    tl.store(new_streams_ptr + base + 0 * D, x0.to(DTYPE), mask=ok)
                    tl.store(new_streams_ptr + base + 1 * D, x1.to(DTYPE), mask=ok)
                    tl.store(new_streams_ptr + base + 2 * D, x2.to(DTYPE), mask=ok)
                    tl.store(new_streams_ptr + base + 3 * D, x3.to(DTYPE), mask=ok)
                if FMA_MIX:
                    sq += tl.sum(tl.fma(x3, x3, tl.fma(x2, x2, tl.fma(x1, x1, x0 * x0))), axis=1)
                else:
                    sq += tl.sum(x0 * x0 + x1 * x1 + x2 * x2 + x3 * x3, axis=1)
                if RELOAD_D == 0 and not APART:
                    f_ok = d_ok[:, None] & c_ok[None, :]
                    fcol = fn_ptr + cols[None, :] * width + ds[:, None]  # [BLOCK_D, 32] of stream 0's fn
                    f0 = tl.load(fcol + 0 * D, mask=f_ok, other=0.0)
                    f1 = tl.load(fcol + 1 * D, mask=f_ok, other=0.0)
                    f2 = tl.load(fcol + 2 * D, mask=f_ok, other=0.0)
                    f3 = tl.load(fcol + 3 * D, mask=f_ok, other=0.0)
                    if (PROJ == "fma") & (BLOCK_T == 1):
                        # one row: [BLOCK_D, 32] products, the four streams summed before the one
                        # reduction over D. The 3-D form below, with a row axis of one, compiled
                        # the decode sweep to 1,746 sm_90 instructions (413 FMUL a thread, for 64
                        # products a thread); this way 576 (tests/runtime/compile_sm90.py --sass)
                        p = tl.sum(x0, axis=0)[:, None] * f0 + tl.sum(x1, axis=0)[:, None] * f1
                        p += tl.sum(x2, axis=0)[:, None] * f2 + tl.sum(x3, axis=0)[:, None] * f3
                        m += tl.sum(p, axis=0)[None, :]
                    elif PROJ == "fma":  # [BLOCK_T, BLOCK_D, 1] * [1, BLOCK_D, 32] summed over D
                        m += tl.sum(x0[:, :, None] * f0[None, :, :], axis=1)
                        m += tl.sum(x1[:, :, None] * f1[None, :, :], axis=1)
                        m += tl.sum(x2[:, :, None] * f2[None, :, :], axis=1)
                        m += tl.sum(x3[:, :, None] * f3[None, :, :], axis=1)
                    elif PROJ == "tf32x2":  # fn's TF32 remainder, then its head (split on the host)
                        # per stream, the tile's products summed from zero and then added to
                        # the running sum, as Triton lowers one tf32x3 dot (a blocked sum):
                        # added straight into it they measured 6.1e-6 from float64 against
                        # tf32x3's 5.0e-7 (benchmarks/results/tf32_accumulation_cpu.md
                        # emulates both); the four streams' chains independent of each other
                        lcol = fn_lo_ptr + cols[None, :] * width + ds[:, None]
                        lo0 = tl.load(lcol + 0 * D, mask=f_ok, other=0.0)
                        lo1 = tl.load(lcol + 1 * D, mask=f_ok, other=0.0)
                        lo2 = tl.load(lcol + 2 * D, mask=f_ok, other=0.0)
                        lo3 = tl.load(lcol + 3 * D, mask=f_ok, other=0.0)
                        m += tl.dot(x0, f0, tl.dot(x0, lo0, input_precision="tf32"), input_precision="tf32")
                        m += tl.dot(x1, f1, tl.dot(x1, lo1, input_precision="tf32"), input_precision="tf32")
                        m += tl.dot(x2, f2, tl.dot(x2, lo2, input_precision="tf32"), input_precision="tf32")
                        m += tl.dot(x3, f3, tl.dot(x3, lo3, input_precision="tf32"), input_precision="tf32")
                    elif PROJ == "bf16x3":  # f0..f3 are fn's bf16 high parts; its middle and low parts follow
                        mcol = fcol + 6 * HC * width  # [3, 24, 4D]: one part further
                        lcol = mcol + 6 * HC * width
                        m += _bf16x3_dot(x0, f0, tl.load(mcol + 0 * D, mask=f_ok, other=0.0),
                                         tl.load(lcol + 0 * D, mask=f_ok, other=0.0), BF16_OPERANDS)
                        m += _bf16x3_dot(x1, f1, tl.load(mcol + 1 * D, mask=f_ok, other=0.0),
                                         tl.load(lcol + 1 * D, mask=f_ok, other=0.0), BF16_OPERANDS)
                        m += _bf16x3_dot(x2, f2, tl.load(mcol + 2 * D, mask=f_ok, other=0.0),
                                         tl.load(lcol + 2 * D, mask=f_ok, other=0.0), BF16_OPERANDS)
                        m += _bf16x3_dot(x3, f3, tl.load(mcol + 3 * D, mask=f_ok, other=0.0),
                                         tl.load(lcol + 3 * D, mask=f_ok, other=0.0), BF16_OPERANDS)
                    else:
                        m += tl.dot(x0, f0, input_precision=PROJ)
                        m += tl.dot(x1, f1, input_precision=PROJ)
                        m += tl.dot(x2, f2, input_precision=PROJ)
                        m += tl.dot(x3, f3, input_precision=PROJ)
                if FMA_MIX:
                    xc = tl.fma(p3[:, None], x3, tl.fma(p2[:, None], x2, tl.fma(p1[:, None], x1, p0[:, None] * x0)))
                    xc = xc.to(DTYPE)
                else:
                    xc = (p0[:, None] * x0 + p1[:, None] * x1 + p2[:, None] * x2 + p3[:, None] * x3).to(DTYPE)
                tl.store(x_ptr + rows64[:, None] * D + ds[None, :], xc, mask=ok)
                xcf = xc.to(tl.float32)
                xsq += tl.sum(xcf * xcf, axis=1)
            if RELOAD_D > 0:
                # The projection of this chunk from X' as just written (L2-hot): the operand
                # is a plain load, which the compiler stages for the tensor cores itself; a
                # dot on the mixing's values made it recompute the mixing in the operand's
                # layout (twice the arithmetic, every coefficient held twice: spills).
                tl.debug_barrier()  # every thread's X' stores are visible to the whole program
                src = new_streams_ptr if HAS_OUT else streams_ptr
                m = _project_columns(src, fn_ptr, fn_lo_ptr, rows64, r_ok, c0, c_hi, D, m, PROJ, BLOCK_D,
                                     BF16_OPERANDS)
        part = part_ptr + (split * T + rows64) * PART  # [BLOCK_T] row starts
        if not APART:
            tl.store(part[:, None] + cols[None, :], m, mask=r_ok[:, None])
        tl.store(part + NCOL, sq, mask=r_ok)
        tl.store(part + NCOL + 1, xsq, mask=r_ok)
    if PHASE == SWEEP_AND_TAIL:
        tl.debug_barrier()  # every thread's partial is written before the ticket releases them
        ticket = tl.atomic_add(count_ptr + pid, 1, sem="acq_rel")
        last = ticket == tl.num_programs(1) - 1
        tl.store(count_ptr + pid, 0, mask=last)  # all others have taken theirs: reset for the next call
        n_sub = tl.where(last, (tl.minimum(T - pid * BLOCK_T, BLOCK_T) + TAIL_T - 1) // TAIL_T, 0)
        norm_lo = 0
        norm_hi = D
    elif PHASE == FINISH:
        n_sub = (tl.minimum(T - pid * BLOCK_T, BLOCK_T) + TAIL_T - 1) // TAIL_T
        norm_lo = (split - 1) * SPLIT_D  # program 0 computes the coefficients and normalises nothing
        norm_hi = tl.where(split == 0, norm_lo, tl.minimum(norm_lo + SPLIT_D, D))
    if (PHASE == SWEEP_AND_TAIL) | (PHASE == FINISH):
        if PHASE == FINISH:
            # the sweep's splits (one program more: the coefficients'), known to be >= 1: as
            # num_programs - 1 alone, Triton 3.6 compiled the flash finish to 80 registers
            # issuing 10 of its 52 partial loads before the first add (168 and 48 with the
            # bound), and at 2-8 flash rows it measured 5.0 -> 6.1-6.4 us on the H200
            # (tile_sweep_h200_decode_finish.md)
            n_splits = tl.maximum(tl.num_programs(1) - 1, 1)
        else:
            n_splits = tl.num_programs(1)
        for sub in range(0, n_sub):
            t_rows = pid * BLOCK_T + sub * TAIL_T + tl.arange(0, TAIL_T)
            t_ok = t_rows < T
            t_rows64 = t_rows.to(tl.int64)
            t_xsq = tl.zeros((TAIL_T,), dtype=tl.float32)
            # sum x^2 only where rows are normalised: the coefficients' own program of a
            # finishing launch (split 0) normalises nothing, and its loads and reduction
            # here came before the coefficients' partials in the sm_90 code, one more L2
            # round trip on the launch's longest program
            if norm_hi > norm_lo:
                for s_lo in range(0, n_splits, CHUNK):
                    sp = s_lo + tl.arange(0, CHUNK)
                    ok2 = t_ok[:, None] & (sp[None, :] < n_splits)  # [TAIL_T, CHUNK]
                    at = part_ptr + (sp[None, :].to(tl.int64) * T + t_rows64[:, None]) * PART
                    t_xsq += tl.sum(tl.load(at + NCOL + 1, mask=ok2, other=0.0, cache_modifier=".cg"), axis=1)
            if (split == 0) | (PHASE == SWEEP_AND_TAIL):  # the coefficients, once per row
                # the partials of every split, summed in split order: [TAIL_T, 4] / [.., 4, 4] tensors
                h = tl.arange(0, HC)
                c_idx = h[:, None] * HC + h[None, :]
                if TAIL_T == 1:
                    # one row: the scales and biases first. Loaded after the partials' loop
                    # they were a memory round trip of their own after it (sm_90 code); on
                    # the H200 first is 0.14-0.17 us shorter per finish at 1-8 decode rows,
                    # and at 8 rows per program (64 rows) 7-10 us longer
                    # (tile_sweep_h200_finish_steps.md)
                    scale_pre, scale_post, scale_comb = (tl.load(scale_ptr + 0), tl.load(scale_ptr + 1),
                                                         tl.load(scale_ptr + 2))
                    base_pre, base_post = tl.load(base_ptr + h), tl.load(base_ptr + HC + h)
                    base_comb = tl.load(base_ptr + 2 * HC + c_idx)
                z_pre = tl.zeros((TAIL_T, HC), dtype=tl.float32)
                z_post = tl.zeros((TAIL_T, HC), dtype=tl.float32)
                z_comb = tl.zeros((TAIL_T, HC, HC), dtype=tl.float32)
                t_sq = tl.zeros((TAIL_T,), dtype=tl.float32)
                for s_lo in range(0, n_splits, CHUNK):
                    sp = s_lo + tl.arange(0, CHUNK)
                    ok2 = t_ok[:, None] & (sp[None, :] < n_splits)
                    at = part_ptr + (sp[None, :].to(tl.int64) * T + t_rows64[:, None]) * PART
                    z_pre += tl.sum(tl.load(at[:, :, None] + h[None, None, :], mask=ok2[:, :, None], other=0.0,
                                            cache_modifier=".cg"), axis=1)
                    z_post += tl.sum(tl.load(at[:, :, None] + HC + h[None, None, :], mask=ok2[:, :, None],
                                             other=0.0, cache_modifier=".cg"), axis=1)
                    z_comb += tl.sum(tl.load(at[:, :, None, None] + 2 * HC + c_idx[None, None, :, :],
                                             mask=ok2[:, :, None, None], other=0.0, cache_modifier=".cg"), axis=1)
                    t_sq += tl.sum(tl.load(at + NCOL, mask=ok2, other=0.0, cache_modifier=".cg"), axis=1)
                rstd = 1.0 / tl.sqrt(t_sq / (HC * D) + norm_eps)
                if TAIL_T > 1:
                    scale_pre, scale_post, scale_comb = (tl.load(scale_ptr + 0), tl.load(scale_ptr + 1),
                                                         tl.load(scale_ptr + 2))
                    base_pre, base_post = tl.load(base_ptr + h), tl.load(base_ptr + HC + h)
                    base_comb = tl.load(base_ptr + 2 * HC + c_idx)
                # pre = sigmoid((z * rstd) * scale_0 + base) + eps; post = 2 sigmoid(...); comb logits
                z_pre = (z_pre * rstd[:, None]) * scale_pre + base_pre[None, :]
                z_post = (z_post * rstd[:, None]) * scale_post + base_post[None, :]
                z_comb = (z_comb * rstd[:, None, None]) * scale_comb + base_comb[None, :, :]
                pre = 1.0 / (1.0 + tl.exp(-z_pre)) + hc_eps
                post = 2.0 / (1.0 + tl.exp(-z_post))
                tl.store(pre_ptr + t_rows64[:, None] * HC + h[None, :], pre, mask=t_ok[:, None])
                tl.store(post_ptr + t_rows64[:, None] * HC + h[None, :], post, mask=t_ok[:, None])
                if REG_FINISH:
                    # comb as one [TAIL_T] vector per entry (split out of the tensor: every index
                    # a trailing pair, [t, a, b, c, d] for row 2a + b, column 2c + d), so a row's
                    # 16 entries sit in the same threads and the softmax and Sinkhorn below are
                    # register arithmetic. On [TAIL_T, 4, 4] tensors each of the Sinkhorn's 40
                    # normalisations is a cross-lane reduction: at decode that serial chain
                    # outlasted the whole sweep (ncu_h200_attention_gate_mhc.md).
                    d0, d1 = tl.split(tl.reshape(z_comb, (TAIL_T, 2, 2, 2, 2)))
                    col0, col2 = tl.split(d0)  # [TAIL_T, 2, 2] over (a, b): columns 0 and 2
                    col1, col3 = tl.split(d1)
                    even, odd = tl.split(col0)  # rows (0, 2) and (1, 3)
                    z00, z20 = tl.split(even)
                    z10, z30 = tl.split(odd)
                    even, odd = tl.split(col1)
                    z01, z21 = tl.split(even)
                    z11, z31 = tl.split(odd)
                    even, odd = tl.split(col2)
                    z02, z22 = tl.split(even)
                    z12, z32 = tl.split(odd)
                    even, odd = tl.split(col3)
                    z03, z23 = tl.split(even)
                    z13, z33 = tl.split(odd)
                    m0 = tl.maximum(tl.maximum(z00, z01), tl.maximum(z02, z03))
                    m1 = tl.maximum(tl.maximum(z10, z11), tl.maximum(z12, z13))
                    m2 = tl.maximum(tl.maximum(z20, z21), tl.maximum(z22, z23))
                    m3 = tl.maximum(tl.maximum(z30, z31), tl.maximum(z32, z33))
                    z00, z01, z02, z03 = tl.exp(z00 - m0), tl.exp(z01 - m0), tl.exp(z02 - m0), tl.exp(z03 - m0)
                    z10, z11, z12, z13 = tl.exp(z10 - m1), tl.exp(z11 - m1), tl.exp(z12 - m1), tl.exp(z13 - m1)
                    z20, z21, z22, z23 = tl.exp(z20 - m2), tl.exp(z21 - m2), tl.exp(z22 - m2), tl.exp(z23 - m2)
                    z30, z31, z32, z33 = tl.exp(z30 - m3), tl.exp(z31 - m3), tl.exp(z32 - m3), tl.exp(z33 - m3)
                    # the softmax's row sums, then Sinkhorn (columns, then rows and columns
                    # sinkhorn_iters - 1 times) as sinkhorn_iters rounds of rows and columns:
                    # the first round's rows are the softmax's (no eps in the sum: adding 0.0
                    # changes no bit; eps added after, in a branch: as an add of 0.0 in every
                    # round it was 16 more adds per round in the sm_90 code). Each
                    # normalisation: four sums as pairs of pairs (three dependent adds with the
                    # eps, not four), four reciprocals, sixteen multiplies; with FAST_RCP the
                    # reciprocals without div.full's range checks (the sums are at least
                    # hc_eps: no denormals, no overflow). Both halves of a round normalise
                    # rows and then transpose (a renaming of registers, no instruction), so
                    # the second half's rows are the columns and two halves end untransposed.
                    for it in range(sinkhorn_iters):
                        for half in tl.static_range(2):  # 0: rows, 1: columns (as rows)
                            if half == 0:
                                eps_in = tl.where(it == 0, 0.0, hc_eps)
                            else:
                                eps_in = hc_eps
                            s0, s1 = ((z00 + z01) + (z02 + z03)) + eps_in, ((z10 + z11) + (z12 + z13)) + eps_in
                            s2, s3 = ((z20 + z21) + (z22 + z23)) + eps_in, ((z30 + z31) + (z32 + z33)) + eps_in
                            if FAST_RCP:
                                r0, r1, r2, r3 = tl.inline_asm_elementwise(_RCP4_ASM, _RCP4_PINS, [s0, s1, s2, s3],
                                                                           dtype=(tl.float32,) * 4, is_pure=True,
                                                                           pack=1)
                            else:
                                r0, r1, r2, r3 = 1.0 / s0, 1.0 / s1, 1.0 / s2, 1.0 / s3
                            z00, z01, z02, z03 = z00 * r0, z01 * r0, z02 * r0, z03 * r0
                            z10, z11, z12, z13 = z10 * r1, z11 * r1, z12 * r1, z13 * r1
                            z20, z21, z22, z23 = z20 * r2, z21 * r2, z22 * r2, z23 * r2
                            z30, z31, z32, z33 = z30 * r3, z31 * r3, z32 * r3, z33 * r3
                            if half == 0:  # noqa: SIM102 - a constexpr branch around a runtime one
                                if it == 0:
                                    z00, z01, z02, z03 = z00 + hc_eps, z01 + hc_eps, z02 + hc_eps, z03 + hc_eps
                                    z10, z11, z12, z13 = z10 + hc_eps, z11 + hc_eps, z12 + hc_eps, z13 + hc_eps
                                    z20, z21, z22, z23 = z20 + hc_eps, z21 + hc_eps, z22 + hc_eps, z23 + hc_eps
                                    z30, z31, z32, z33 = z30 + hc_eps, z31 + hc_eps, z32 + hc_eps, z33 + hc_eps
                            z01, z02, z03, z10, z12, z13, z20, z21, z23, z30, z31, z32 = (
                                z10, z20, z30, z01, z21, z31, z02, z12, z32, z03, z13, z23)
                    at_comb = comb_ptr + t_rows64 * HC * HC
                    tl.store(at_comb + 0, z00, mask=t_ok)
                    tl.store(at_comb + 1, z01, mask=t_ok)
                    tl.store(at_comb + 2, z02, mask=t_ok)
                    tl.store(at_comb + 3, z03, mask=t_ok)
                    tl.store(at_comb + 4, z10, mask=t_ok)
                    tl.store(at_comb + 5, z11, mask=t_ok)
                    tl.store(at_comb + 6, z12, mask=t_ok)
                    tl.store(at_comb + 7, z13, mask=t_ok)
                    tl.store(at_comb + 8, z20, mask=t_ok)
                    tl.store(at_comb + 9, z21, mask=t_ok)
                    tl.store(at_comb + 10, z22, mask=t_ok)
                    tl.store(at_comb + 11, z23, mask=t_ok)
                    tl.store(at_comb + 12, z30, mask=t_ok)
                    tl.store(at_comb + 13, z31, mask=t_ok)
                    tl.store(at_comb + 14, z32, mask=t_ok)
                    tl.store(at_comb + 15, z33, mask=t_ok)
                else:  # softmax over each row (j), then Sinkhorn: reductions across lanes
                    e = tl.exp(z_comb - tl.max(z_comb, axis=2)[:, :, None])
                    c = e / tl.sum(e, axis=2)[:, :, None] + hc_eps
                    c = c / (tl.sum(c, axis=1)[:, None, :] + hc_eps)
                    for _ in range(sinkhorn_iters - 1):
                        c = c / (tl.sum(c, axis=2)[:, :, None] + hc_eps)
                        c = c / (tl.sum(c, axis=1)[:, None, :] + hc_eps)
                    tl.store(comb_ptr + t_rows64[:, None, None] * HC * HC + c_idx[None, :, :], c,
                             mask=t_ok[:, None, None])
            rstd_x = 1.0 / tl.sqrt(t_xsq / D + norm_eps)
            for n_d0 in range(norm_lo, norm_hi, NORM_D):  # weight * (x * rstd), rounded as the reference
                n_ds = n_d0 + tl.arange(0, NORM_D)
                n_ok_d = n_ds < norm_hi
                n_ok = t_ok[:, None] & n_ok_d[None, :]
                n_ptr = x_ptr + t_rows64[:, None] * D + n_ds[None, :]
                n_x = tl.load(n_ptr, mask=n_ok, other=0.0, cache_modifier=".cg").to(tl.float32)
                y = (n_x * rstd_x[:, None]).to(DTYPE).to(tl.float32)
                w = tl.load(norm_w_ptr + n_ds, mask=n_ok_d, other=0.0).to(tl.float32)
                tl.store(n_ptr, (w[None, :] * y).to(DTYPE), mask=n_ok)


SITE_HELPERS = (_bf16x3_dot, _project_columns, _mix_coefficients, gdc_enter)  # what the site kernel calls (runtime/kernels/backend.py's jit binds them)


def site_launches(tiles: MhcTiling, t: int, d: int, has_out: bool, dtype: torch.dtype,
                  pdl: bool = False, at_exit: bool = False) -> list[tuple[tuple, dict]]:
    """(grid, keyword arguments) of each launch of one call, in order: the sweep (with the
    tail from ``tiles.tail_rows``), the sweep, the projection and the finish
    (``tiles.apart``), else the sweep and the finish (``pdl``: launched
    dependent on the sweep, runtime/kernels/pdl.py; ``at_exit``: the sweep lets it launch as
    it exits). The sm_90 compile check
    (tests/runtime/compile_sm90.py) compiles exactly these."""
    # No FMA contraction: Triton may compute X' twice (for the store and, rematerialised in
    # the tensor-core operand's layout, for the projection); contracted differently, the
    # two copies rounded to different bf16 values (mhc_tiles.py).
    common = dict(HAS_OUT=has_out, DTYPE=TL_DTYPES[dtype], BLOCK_D=tiles.block_d, PROJ=tiles.projection,
                  CHUNK=tiles.chunk, RELOAD_D=tiles.reload_d,
                  REG_FINISH=tiles.finish_registers, PIN_MIX=tiles.pin_mix, FAST_RCP=tiles.fast_reciprocal,
                  FMA_MIX=tiles.fma_mix, BF16_OPERANDS=tiles.bf16_operands,
                  COEF_IN_LOOP=tiles.coefficients_per_tile, enable_fp_fusion=False)
    sweep = dict(PHASE=(SWEEP_AND_TAIL if tiles.tail else SWEEP).value, BLOCK_T=tiles.block_t, TAIL_T=tiles.tail_t,
                 NORM_D=tiles.tail_d, num_warps=tiles.num_warps, **common)
    if tiles.stages:
        sweep["num_stages"] = tiles.stages
    if tiles.tail:
        return [(tiles.grid(t, d), sweep)]
    finish = dict(PHASE=FINISH.value, BLOCK_T=tiles.tail_t, TAIL_T=tiles.tail_t, NORM_D=tiles.block_d,
                  num_warps=tiles.finish_warps, **common)
    if tiles.apart:  # sweep, projection, finish; not dependent (the finish follows the projection)
        project = dict(common, PHASE=PROJECT.value, BLOCK_T=tiles.apart_t, BLOCK_D=tiles.apart_d,
                       TAIL_T=tiles.tail_t, NORM_D=tiles.block_d, num_warps=tiles.apart_warps)
        return [(tiles.grid(t, d), dict(sweep, APART=True)), (tiles.project_grid(t, d), project),
                (tiles.finish_grid(t, d), finish)]
    return [(tiles.grid(t, d), dict(sweep, PDL=pdl, PDL_AT_EXIT=pdl and at_exit)),
            (tiles.finish_grid(t, d), dict(finish, PDL=pdl, launch_pdl=pdl))]


class FusedMhc:
    """Callable with :func:`runtime.kernels.reference.mhc_site`'s signature (hc = 4).

    Holds the row-block ticket counters (``runtime/kernels/tickets.py``) and the "tf32x2"
    projection's split of each fn weight (:class:`Tf32Splits`) and the "bf16x3" projection's
    parts (:class:`Bf16Splits`)."""

    def __init__(self, policy: MhcPolicy | None = None) -> None:
        """``policy``: how calls are tiled (default :class:`MhcPolicy`, or one program per row
        block when interpreted); benchmarks and tests pass others."""
        self.kernel = jit(_mhc_site_kernel, helpers=SITE_HELPERS)
        self.policy = policy or (INTERPRETED if interpret_requested() else MhcPolicy())
        self.tickets = TicketCounters()
        self.fn_splits = Tf32Splits()
        self.fn_parts = Bf16Splits()

    def __call__(self, streams, out, prev: HcMix | None, pre_shift, fn, base, scale, norm_weight,
                 config: V41Config, num: Numerics) -> tuple[torch.Tensor, HcMix, torch.Tensor]:
        t, hc, d = streams.shape
        if hc != 4:
            raise ValueError(f"fused mhc: hc_mult must be 4, got {hc}")
        dev = streams.device
        streams = streams.contiguous()
        new_streams = torch.empty_like(streams) if out is not None else streams
        pre = torch.empty(t, hc, dtype=torch.float32, device=dev)
        post = torch.empty(t, hc, dtype=torch.float32, device=dev)
        comb = torch.empty(t, hc, hc, dtype=torch.float32, device=dev)
        x = torch.empty(t, d, dtype=streams.dtype, device=dev)
        if t == 0:
            return new_streams, HcMix(pre, post, comb), x
        if out is not None:
            out_arg = out.contiguous()
            post_arg, comb_arg = prev.post.float().contiguous(), prev.comb.float().contiguous()
        else:
            out_arg, post_arg, comb_arg = x, pre, comb  # unused (HAS_OUT=False)
        pre_shift, fn = pre_shift.float().contiguous(), fn.float().contiguous()
        tiles = self.policy.tiling(t, d, cuda=dev.type == "cuda")
        if tiles.projection == "tf32x2" and streams.dtype == torch.float32:
            tiles = replace(tiles, projection="tf32x3")  # float32 X' is not exact in TF32
        if tiles.projection == "bf16x3" and streams.dtype != torch.bfloat16:
            # X' of other dtypes is not exact in bf16; float16 X' is in TF32 ("tf32x2")
            tiles = replace(tiles, projection="tf32x2" if streams.dtype == torch.float16 else "tf32x3")
        if tiles.projection == "tf32x2":
            fn, fn_lo = self.fn_splits.get(fn)
        elif tiles.projection == "bf16x3":
            fn = fn_lo = self.fn_parts.get(fn)  # [3, 24, 4D]: the kernel finds the parts from fn_ptr
        else:
            fn_lo = fn
        base, scale, norm_weight = base.float().contiguous(), scale.float().contiguous(), norm_weight.contiguous()
        grid = tiles.grid(t, d)
        part = torch.empty(grid[1], t, MIX_COLS + 2, dtype=torch.float32, device=dev)
        args = (streams, out_arg, post_arg, comb_arg, pre_shift, fn, fn_lo, base, scale, norm_weight,
                new_streams, x, part, self.tickets.get(dev, grid[0]), pre, post, comb,
                t, d, tiles.split_d, config.rms_norm_eps, config.hc_eps, config.hc_sinkhorn_iters)
        pdl = dependent_launch(t <= self.policy.dependent_finish_to, dev)
        at_exit = t >= self.policy.finish_at_exit_from
        for launch_grid, kwargs in site_launches(tiles, t, d, out is not None, streams.dtype, pdl, at_exit):
            self.kernel[launch_grid](*args, **kwargs)
        return new_streams, HcMix(pre, post, comb), x
