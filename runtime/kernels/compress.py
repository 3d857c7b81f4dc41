"""Fused compressor pooling + RMSNorm (the compressor's step before RoPE + quant): each
group's per-channel softmax over its ``ratio`` gate rows weights its kv rows, and the
pooled latent is rounded to the model dtype and RMS-normalised, in one kernel.

Same signature and math as :func:`runtime.compressor.pool_and_norm`, in the reference's
order: max over the group, exp(gate - max), the total summed row by row, then
kv_j * (e_j / total) accumulated row by row; the rounding to ``dtype``, float32
statistics, the normalised row rounded to ``dtype`` and ``weight * y`` rounded once (as
torch does for a bf16 product) -- see :func:`runtime.numerics.rms_norm`.

One program owns BLOCK_G groups and all C channels (C <= 512 in every preset), so the
latents never leave registers between pooling and the norm. ``tl.exp`` and ``rsqrt`` are
the GPU's fast versions, so results match the reference to a few float32 ulps, not
bit for bit (tolerances in tests/runtime/test_kernels_compress.py); FMA contraction is off
so the accumulation rounds each product as the reference does.
"""

from __future__ import annotations

import torch
import triton.language as tl

from runtime.kernels.backend import cdiv, jit, next_pow2
from runtime.kernels.mhc import TL_DTYPES

TILE_ELEMENTS = 512  # groups per program: about this many channels (best of 512-8192, benchmarks/tile_sweep.py)
# Warps per program: 8 while a call has at most FEW_PROGRAMS programs, else 4 (FusedPoolNorm.warps says why)
FEW_PROGRAMS = 1024
FEW_PROGRAMS_WARPS = 8
NUM_WARPS = 4


def _pool_norm_kernel(
    kv_ptr, gate_ptr, w_ptr, out_ptr,
    G, C, eps,
    RATIO: tl.constexpr, HAS_WEIGHT: tl.constexpr, DTYPE: tl.constexpr, OUT_DTYPE: tl.constexpr,
    ROUND_BF16: tl.constexpr, ROUND_BF16_OUT: tl.constexpr,
    BLOCK_G: tl.constexpr, BLOCK_C: tl.constexpr, ROWS_FIRST: tl.constexpr,
):
    """``ROWS_FIRST`` (RATIO <= 2 only): every gate and kv row is loaded before any
    arithmetic, then the same operations in the same order as the loops (so the same bits).
    In the loops' form (Triton 3.6, sm_90, 512 channels) the kv loads come after the first
    division's branches (div.rn's slow path) and the gate loads after a barrier that waits
    for the norm weight: three memory round trips one after another on a call's path."""
    # an eager launch passes Python floats as fp32, inductor's (torch.compile) as fp64: pin fp32
    eps = tl.cast(eps, tl.float32)
    groups = tl.program_id(0) * BLOCK_G + tl.arange(0, BLOCK_G)
    cols = tl.arange(0, BLOCK_C)
    c_ok = cols < C
    ok = (groups < G)[:, None] & c_ok[None, :]
    first_row = groups.to(tl.int64)[:, None] * RATIO  # [BLOCK_G, 1]
    # The norm weight is loaded first: loaded where it is used, after the cross-warp
    # reduction's barrier, it was a second memory round trip (LDG after BAR.SYNC in the
    # sm_90 SASS) on the path of a small call. H200, same run: 0.01-0.2 us faster in every
    # case, e.g. 8 `mid` rows 2.24 -> 2.04 us (tile_sweep_h200_inv_rope_compress.md).
    if HAS_WEIGHT:
        if ROWS_FIRST:  # [BLOCK_G, BLOCK_C], the rows' own layout: no conversion (and no barrier) to wait on
            w = tl.load(w_ptr + (cols[None, :] + 0 * groups[:, None]), mask=ok, other=0.0).to(tl.float32)
        else:
            w = tl.load(w_ptr + cols, mask=c_ok, other=0.0).to(tl.float32)[None, :]  # [1, BLOCK_C]

    if ROWS_FIRST:
        g0 = tl.load(gate_ptr + first_row * C + cols[None, :], mask=ok, other=0.0)
        kv0 = tl.load(kv_ptr + first_row * C + cols[None, :], mask=ok, other=0.0)
        if RATIO == 2:
            g1 = tl.load(gate_ptr + (first_row + 1) * C + cols[None, :], mask=ok, other=0.0)
            kv1 = tl.load(kv_ptr + (first_row + 1) * C + cols[None, :], mask=ok, other=0.0)
        top = tl.maximum(tl.full((BLOCK_G, BLOCK_C), float("-inf"), tl.float32), g0)
        if RATIO == 2:
            top = tl.maximum(top, g1)
        total = tl.zeros((BLOCK_G, BLOCK_C), tl.float32) + tl.exp(g0 - top)
        if RATIO == 2:
            total += tl.exp(g1 - top)
        pooled = tl.zeros((BLOCK_G, BLOCK_C), tl.float32) + kv0 * tl.math.div_rn(tl.exp(g0 - top), total)
        if RATIO == 2:
            pooled += kv1 * tl.math.div_rn(tl.exp(g1 - top), total)
    else:
        top = tl.full((BLOCK_G, BLOCK_C), float("-inf"), tl.float32)
        for j in tl.static_range(RATIO):
            g = tl.load(gate_ptr + (first_row + j) * C + cols[None, :], mask=ok, other=0.0)
            top = tl.maximum(top, g)
        total = tl.zeros((BLOCK_G, BLOCK_C), tl.float32)
        for j in tl.static_range(RATIO):
            g = tl.load(gate_ptr + (first_row + j) * C + cols[None, :], mask=ok, other=0.0)
            total += tl.exp(g - top)
        pooled = tl.zeros((BLOCK_G, BLOCK_C), tl.float32)
        for j in tl.static_range(RATIO):
            at = (first_row + j) * C + cols[None, :]
            g = tl.load(gate_ptr + at, mask=ok, other=0.0)
            kv = tl.load(kv_ptr + at, mask=ok, other=0.0)
            pooled += kv * tl.math.div_rn(tl.exp(g - top), total)

    # Roundings to bfloat16 are explicit round-to-nearest-even on the float32 bits: the
    # interpreter's cast truncates (the GPU's rounds to nearest even, like this).
    if ROUND_BF16:
        bits = pooled.to(tl.int32, bitcast=True)
        y = ((bits + 0x7FFF + ((bits >> 16) & 1)) & -65536).to(tl.float32, bitcast=True)
    else:
        y = pooled.to(DTYPE).to(tl.float32)
    y = tl.where(ok, y, 0.0)
    mean_sq = tl.sum(y * y, axis=1) / C
    normed = y * tl.rsqrt(mean_sq + eps)[:, None]
    if ROUND_BF16:
        bits = normed.to(tl.int32, bitcast=True)
        normed = ((bits + 0x7FFF + ((bits >> 16) & 1)) & -65536).to(tl.float32, bitcast=True)
    else:
        normed = normed.to(DTYPE).to(tl.float32)
    if HAS_WEIGHT:
        result = w * normed
        if ROUND_BF16_OUT:
            bits = result.to(tl.int32, bitcast=True)
            result = ((bits + 0x7FFF + ((bits >> 16) & 1)) & -65536).to(tl.float32, bitcast=True)
    else:
        result = normed
    # result is now exactly representable in OUT_DTYPE (or OUT_DTYPE is float32 / float16,
    # whose casts round to nearest even in both modes).
    tl.store(out_ptr + groups.to(tl.int64)[:, None] * C + cols[None, :], result.to(OUT_DTYPE), mask=ok)


class FusedPoolNorm:
    """Callable with :func:`runtime.compressor.pool_and_norm`'s signature."""

    def __init__(self, tile_elements: int = TILE_ELEMENTS, num_warps: int | None = None, rows_first: bool = True) -> None:
        """``tile_elements`` (channels per program) and ``num_warps`` (None: by the call's
        program count, ``warps``): for benchmark sweeps;
        ``rows_first``: at ratio <= 2, every row loaded before any arithmetic (the kernel's
        ``ROWS_FIRST``; the same bits as the loops). On since session 33: faster in every
        case of three runs on an H100 (graph replay, us, loops -> rows first, 512 channels
        per program on 4 warps; benchmarks/results/tile_sweep_h100_session33_compress_1.md,
        tile_sweep_h100_session33_compress_2.md, tile_sweep_h100_session33_compress_3.md):
        ``mid`` 2 rows 2.21 / 2.25 / 2.26 -> 1.98 / 2.02 / 2.03, 64 rows 2.26 / 2.32 / 2.30 ->
        2.05 / 2.11 / 2.13, 4,096 rows 5.80 / 5.83 / 5.85 -> 4.92 / 4.96 / 5.12; ``flash`` 2
        rows 2.20 / 2.25 / 2.30 -> 2.00 / 2.05 / 2.13, 64 rows 2.29 / 2.32 / 2.39 -> 2.08 /
        2.15 / 2.19, 4,096 rows 5.77 / 5.81 / 5.96 -> 4.89 / 4.95 / 5.03. On 2 warps it
        was slower than on 4 in every case, as the loops were at 2 and 64 rows. Two whole
        sweeps since (session 34, H100: tile_sweep_h100_session34_compress_1.md,
        tile_sweep_h100_session34_compress_2.md) found no tiling faster than this default
        (512 channels per program on 4 warps, rows first) at any row count: ``mid`` 2 / 64 /
        4,096 rows 1.92 / 1.99 / 4.84 and 1.92 / 1.98 / 4.83 us, the loops' form 2.12 / 2.21 /
        5.68 in both; the nearest others 1,024 channels (4,096 rows 5.03-5.04) and 2 warps.
        Since session 35 small calls run on 8 warps (``warps``)."""
        self.kernel = jit(_pool_norm_kernel)
        self.tile_elements = tile_elements
        self.num_warps = num_warps
        self.rows_first = rows_first

    def warps(self, programs: int) -> int:
        """Warps per program for a call of ``programs`` programs: 8 up to FEW_PROGRAMS (2,048
        rows at ratio 2), else 4. On 8 warps each thread holds fewer of a 512-channel group's
        channels (static sm_90, Triton 3.6, rows first: 468 instructions per thread on 4
        warps, 333 on 8), and a small call's time is that chain; a large call has programs
        enough in flight, and 8 warps per program leave room for fewer of them. H100, graph
        replay, us, 4 -> 8 warps, two runs (session 35:
        benchmarks/results/tile_sweep_h100_session35_compress_1.md,
        tile_sweep_h100_session35_compress_2.md): ``mid`` 2 rows (1 program) 1.94 / 2.10 ->
        1.91 / 1.94, 64 rows (32) 2.11 / 2.14 -> 1.89 / 2.00, 512 rows (256) 2.34 / 2.35 ->
        2.23 / 2.25, 4,096 rows (2,048) 4.82 / 4.83 -> 5.35 / 5.36; ``flash`` 2 rows 1.89 /
        1.90 -> 1.81 / 1.83, 64 rows 2.02 / 2.03 -> 1.90 / 1.92, 512 rows 2.34 / 2.36 -> 2.26 /
        2.27, 4,096 rows 4.97 / 4.83 -> 5.45 / 5.34. 16 warps tied 8 up to 64 rows (``mid`` 64
        rows 1.90 / 1.92) and lost from 512 (2.37-2.39; 4,096 rows 7.06-7.24). A third run
        with this rule as the default (tile_sweep_h100_session35_compress_3.md; default / 4 / 8
        warps): ``mid`` 64 rows 1.91 / 1.99 / 1.92, ``flash`` 64 rows 2.12 / 2.03 / 1.95 (the
        default is the 8-warp program: that run's spread), and past the boundary 8 warps were
        ahead at 2,048 rows (1,024 programs: 3.44 / 3.45 against 3.58 / 3.59), tied at 1,024 rows
        and behind at 4,096 (5.33-5.36 against 4.84-4.87). In the table
        (kernels_h100_session35_compress_attention_packed.md) 64 rows took 1.61x / 1.59x an
        empty launch, paired (1.74x / 1.72x in kernels_h100_session33_final.md). The boundary
        was 256 programs until session 36, whose two sweeps between 512 and 4,096 rows
        (tile_sweep_h100_session36_compress_1.md, tile_sweep_h100_session36_compress_2.md; 4 ->
        8 warps, ``mid`` / ``flash``) repeated the 2,048-row lead (3.57 / 3.52 -> 3.47 / 3.42 and
        3.56 / 3.56 -> 3.45 / 3.49 us) with 1,024 rows tied (2.68-2.70 either way) and 3,072
        rows (1,536 programs) behind (4.18-4.29 -> 4.38-4.40): so 8 warps up to 1,024
        programs. With that default (tile_sweep_h100_session36_compress_3.md) 2,048 rows took
        3.43 / 3.44 us against 3.52 / 3.58 on 4 warps."""
        if self.num_warps is not None:
            return self.num_warps
        return FEW_PROGRAMS_WARPS if programs <= FEW_PROGRAMS else NUM_WARPS

    def __call__(self, kv: torch.Tensor, gate: torch.Tensor, ratio: int, norm_weight: torch.Tensor | None,
                 eps: float, dtype: torch.dtype) -> torch.Tensor:
        if kv.dim() != 2 or gate.shape != kv.shape:
            raise ValueError(f"pool_and_norm: kv and gate must be the same [G*ratio, C], "
                             f"got {tuple(kv.shape)} and {tuple(gate.shape)}")
        if ratio < 1 or kv.shape[0] % ratio:
            raise ValueError(f"pool_and_norm: {kv.shape[0]} rows are not whole groups of ratio {ratio}")
        channels = kv.shape[1]
        if norm_weight is not None and norm_weight.shape != (channels,):
            raise ValueError(f"pool_and_norm: norm weight must be [{channels}], got {tuple(norm_weight.shape)}")
        out_dtype = dtype if norm_weight is None else torch.promote_types(norm_weight.dtype, dtype)
        if dtype not in TL_DTYPES or out_dtype not in TL_DTYPES:
            raise ValueError(f"pool_and_norm: unsupported dtype {dtype}")
        groups = kv.shape[0] // ratio
        out = torch.empty(groups, channels, dtype=out_dtype, device=kv.device)
        if groups == 0:
            return out
        block_c = next_pow2(channels)
        block_g = max(1, min(64, self.tile_elements // block_c))
        weight = norm_weight.contiguous() if norm_weight is not None else kv
        programs = cdiv(groups, block_g)
        self.kernel[(programs,)](
            kv.float().contiguous(), gate.float().contiguous(), weight, out, groups, channels, float(eps),
            RATIO=ratio, HAS_WEIGHT=norm_weight is not None, DTYPE=TL_DTYPES[dtype],
            OUT_DTYPE=TL_DTYPES[out_dtype],
            ROUND_BF16=dtype == torch.bfloat16, ROUND_BF16_OUT=out_dtype == torch.bfloat16,
            BLOCK_G=block_g, BLOCK_C=block_c, ROWS_FIRST=self.rows_first and ratio <= 2,
            enable_fp_fusion=False, num_warps=self.warps(programs),
        )
        return out
