"""Fused RoPE + cache fake-quant, for the window KV (FP8), the global entries (NVFP4) and
the index keys/queries (MXFP4).

Same signature and math as :func:`runtime.compressor.rope_then_quant`: load a vector,
rotate its trailing rope pairs (float32, rounded back to the model dtype as
``apply_rope`` does), take each quant block's amax, scale, round, dequantise, store,
in one pass. The reference makes a rotated copy, a concatenation, a float32 copy, the
block view and three more temporaries.

``pack`` (FP8 and NVFP4, for a packed static slab: runtime/static/packing.py) runs the
same kernel with PACK set: instead of the dequantised values it stores the codes and
scale bytes of runtime/kv_packing.py's layout, taken from the very q and scale the
plain variant multiplies (the e4m3 byte from the float32 bits of the rounded value, the
e2m1 nibble from its grid index, two nibbles a byte), so unpacking gives the plain
variant's output bit for bit.

At 4,096 rows the kernel was bound by instructions as much as by bytes (an H200 issues
about 33 T lane-instructions/s, so 34 per element of the FP8 case cost as long as its
9.4 MB of traffic), and the layout below is mostly about cutting them. (Not only them:
tiles of 64 elements per thread cut NVFP4 to 27 per element and measured slower, 4.49 vs
3.90 us: benchmarks/results/tile_sweep_h200_rope_quant_tiles.md.)

- A vector is two parts: the quant blocks before the first rope channel (the head: 448
  of 512 channels in the caches) get no rotation arithmetic and no cos/sin loads; only
  the tail blocks holding the rope channels do. Each part's blocks are counted over all
  the call's vectors and taken by programs of their own (the head's programs first, one
  launch), a power of two of blocks each. Until session 18 a program took whole vectors,
  so each part was padded to a power of two per vector (NVFP4: 28 head blocks in 32
  lanes) and every program ran both. Static sm_90 SASS of a 4,096-row launch, per element
  weighted by the parts' sizes: FP8 17.2 -> 14.8, NVFP4 36.6 -> 22.6 (with the e2m1
  rounding below), MXFP4 30.4 -> 23.4. H200, `mid` / `flash`
  (benchmarks/results/tile_sweep_h200_rope_quant_head_tail.md, the kernel before in the
  same run): NVFP4 at 4,096 rows 3.81 / 3.80 -> 3.33 / 3.27 us (58 -> 64-67 % of the
  roofline), one row 1.64 / 1.63 -> 1.40 / 1.36, 64 rows 1.80 / 1.77 -> 1.72 / 1.58; FP8
  one row 1.52 -> 1.33, 4,096 rows 2.88 / 2.82 -> 2.89 / 2.88; MXFP4 index queries
  1-64 rows 0-0.1 us slower (1.61-1.77 us), 4,096 rows 9.75 / 21.55 -> 9.25 / 20.19; so
  small calls of narrow vectors go whole to the rotating programs (``WHOLE_BELOW``).
- The tail loads each vector once and splits it into its even and odd channels in
  registers (``tl.reshape`` + ``tl.split``); cos/sin are loaded once per pair from a
  contiguous index, both formulas are evaluated per pair and joined back (``tl.join``).
  The gather form it replaced (every channel loading its rope partner a second time)
  gave the same bits and measured 1.45-1.65x slower at 4,096 rows on the H200
  (benchmarks/results/tile_sweep_h200_rope_quant_layouts.md).
- Compiled for the GPU (HW_E4M3), the e4m3 roundings are the conversion instruction
  (``cvt.rn.satfinite.e4m3x2.f32``, which saturates at 448 like torch's cast of a
  clamped value), and NVFP4's divisions by the block scale and by 6 are a reciprocal
  with one fma correction (Markstein: y = RN(1/b), q0 = RN(a y), r = a - q0 b exact in
  an fma, RN(q0 + r y) = RN(a/b)), one ``div_rn`` per block instead of one per element.
  Static SASS for sm_90 (tests/runtime/compile_sm90.py's launches) went from 34 / 61 / 38
  to 17 / 37 / 31 instructions per element (FP8 / NVFP4 / MXFP4); measured at 4,096 rows
  (`mid`), 54 -> 67 %, 45 -> 54 %, 59 -> 81 % of the roofline
  (benchmarks/results/kernels_h200_rope_quant.md against kernels_h200_mhc_rope_quant_policy.md).

Interpreted (the CPU tests), the roundings are explicit arithmetic, not casts to
Triton's fp8 type: the interpreter's float32 -> float8e4nv cast is wrong whenever
rounding carries into the exponent (docs/pitfalls.md), and its fma rounds twice before
Triton 3.9. All of it is exact float32 arithmetic on powers of two:

- e4m3 (FP8 values, NVFP4 scales): saturate at 448, take the binary exponent e from the
  float32 bits (at least -6: the subnormals share the spacing 2^-9), divide by the
  spacing 2^(e-3), round half to even, multiply back. torch's ``float8_e4m3fn`` cast
  also saturates (448 for anything larger, measured on torch 2.13).
- e2m1: :func:`runtime.quant.round_to_e2m1`'s spacing 0.5 / 1 / 2 with half to even,
  as m + 2^(E + 22) - 2^(E + 22) (compiled too). It replaced a scaling by the spacing's
  inverse and back: NVFP4 at 4,096 rows 3.81 / 3.80 -> 3.55 / 3.54 us alone, in the old
  layout.
- ue8m0 scales: :func:`runtime.quant.pow2_ceil` from the exponent and mantissa bits.
- Half to even of a float32 v in [0, 2^23) is (v + 2^23) - 2^23.
- bfloat16 (the rotated tail of a bf16 vector): nearest-even on the float32 bits, since
  the interpreter's float32 -> bfloat16 cast truncates.

Signs are applied as ``x * -1.0``, never ``-x``: Triton before 3.7 compiled ``-x`` as
``0 - x`` (triton-lang/triton#10270), which drops the sign of a zero, so a negative value
rounded to zero came out -0 interpreted (and in ``pack``'s sign bit) but +0 compiled on the
H200's Triton 3.6; test_kv_packing.py's pack-vs-plain check failed there, bit for bit.

A division by a power-of-two scale is a multiplication by its exact inverse; NVFP4's
division by its e4m3 scale (and the amax / 6) is ``div_rn`` interpreted, the reciprocal
form above compiled (a plain ``/`` is an approximate division on the GPU). Both must
round like torch's division; test_kernels_rope_quant.py's rounding-edge test puts
values on and one float32 step beside every e2m1 tie under every e4m3 scale. FMA
contraction is switched off on the GPU so the rotation rounds each product like the
reference does (the explicit ``tl.math.fma`` calls are the only fused ones).
"""

from __future__ import annotations

import torch
import triton.language as tl

from runtime.kernels.backend import jit, next_pow2
from runtime.kernels.mhc import TL_DTYPES
from runtime.kv_packing import FORMATS as PACKED_FORMATS
from runtime.kv_packing import PackedKV

# fmt -> (kernel code, channels per scale). Code 0 (rotate only) is a test hook that
# exposes the kernel's rotated values.
FORMATS = {"fp8": (1, 32), "nvfp4": (2, 16), "mxfp4": (3, 32)}
ROTATE_ONLY = 0
# Quant blocks per program: about this many channels' worth (TILE_ELEMENTS // block, a
# power of two), in every format. H200, head / tail programs (tile_sweep_h200_rope_quant_head_tail.md):
# for 512-channel vectors 1,024 against 2,048 was 0.05-0.18 us faster at 8 rows, 0.26-0.33 at
# 64, within 0.01-0.08 at 1 and 4,096 rows; larger tiles slower everywhere.
TILE_ELEMENTS = 1024
# Warps per program when not given: 4 below this many elements (vectors x channels), 2
# from here up. H200, bf16, CUDA-graph replay, tile 1024: 64 rows 4 warps 1.59-1.92 us
# (2 warps, or larger tiles, 1.98-3.56 us); 4,096 rows ([4096, 512] fp8 / nvfp4,
# [4096, 16|32, 128] mxfp4) 4 warps 4.2-4.3 / 4.9 / 14.4 / 28.3 us, 2 warps
# 4.0-4.15 / 4.84 / 13.3 / 26.3 us (the kernel before head / tail programs).
FEW_WARPS_FROM = 2**20
# Vectors of WIDE_FROM channels or more (the window KV and the entries, 512): 4 warps at
# every size. Head / tail programs, 4,096 rows: fp8 2.88-2.89 us with 4 warps against
# 2.99-3.02 with 2, nvfp4 3.27-3.33 against 3.32-3.40 (tile_sweep_h200_rope_quant_head_tail.md).
WIDE_FROM = 512
# Calls of vectors narrower than WHOLE_BELOW channels and of fewer than WHOLE_CALLS_UNDER
# elements go whole to the rotating programs (their head blocks pass the rotation
# unchanged): head / tail programs cost the 128-channel MXFP4 index queries 0-0.1 us at 1-64
# rows (tile_sweep_h200_rope_quant_head_tail.md). H200, four runs, medians
# (tile_sweep_h200_rope_quant_whole.md), head / tail -> whole: 1 row `mid` 1.58 -> 1.53 us,
# `flash` 1.61 -> 1.56 (faster in 4 of 4 runs each); 8 rows 1.70 -> 1.68 (3 of 4) and 1.69 ->
# 1.64 (4 of 4); 64 rows `mid` 1.79 -> 1.76 (3 of 4, 131,072 elements), `flash` 1.80 -> 1.88
# (0 of 4, 262,144 elements); 4,096 rows 9.40 -> 11.12 and 20.31 -> 21.48 (one run).
WHOLE_BELOW = 512
WHOLE_CALLS_UNDER = 2**16


# e4m3 round-to-nearest-even with saturation at 448 by the GPU's own conversion
# (sm_89+): to the byte and back, exactly torch's float8_e4m3fn cast of a value already
# clamped to +-448. Compiled kernels only (HW_E4M3); the interpreter uses the arithmetic.
_E4M3_PTX: tl.constexpr = tl.constexpr(
    "{ .reg .b16 b8; .reg .b32 h2; .reg .b16 lo, hi;"
    " cvt.rn.satfinite.e4m3x2.f32 b8, $1, $1;"
    " cvt.rn.f16x2.e4m3x2 h2, b8;"
    " mov.b32 {lo, hi}, h2;"
    " cvt.f32.f16 $0, lo; }"
)


def _rope_quant_kernel(
    x_ptr, cos_ptr, sin_ptr, out_ptr, scales_ptr,
    V, H, HEAD_PROGRAMS,
    C: tl.constexpr, FMT: tl.constexpr, QB: tl.constexpr, HALF: tl.constexpr,
    HEAD: tl.constexpr, TAIL: tl.constexpr, HEAD_ROWS: tl.constexpr, TAIL_ROWS: tl.constexpr,
    DTYPE: tl.constexpr, ROUND_BF16: tl.constexpr, PACK: tl.constexpr, HW_E4M3: tl.constexpr,
    WIDE: tl.constexpr,
):
    """Each vector of C channels is HEAD quant blocks before its first rope channel and TAIL
    blocks from there (holding the rope channels). The first HEAD_PROGRAMS programs take
    HEAD_ROWS head blocks each, counted over all V vectors (no rotation: no cos/sin loads, no
    rotation arithmetic); the others TAIL_ROWS tail blocks each, rotated. PACK (FMT 1 or 2):
    store the codes (``out_ptr``, uint8) and the scale bytes (``scales_ptr``) of
    runtime/kv_packing.py's layout instead of the dequantised values. HW_E4M3: e4m3
    roundings by the GPU's conversion instruction. WIDE: offsets past 2^31."""
    TWO23: tl.constexpr = 8388608.0  # 2^23: (v + 2^23) - 2^23 rounds v half to even
    N_SCALES: tl.constexpr = C // QB
    pid = tl.program_id(0)
    lane = tl.arange(0, QB)
    for part in tl.static_range(0 if HEAD > 0 else 1, 2 if TAIL > 0 else 1):  # 0: head blocks, 1: tail blocks
        # The part's constexprs (rows per program, blocks per vector, first block) are written
        # out where they are needed: a name bound in an unrolled loop is not a constexpr.
        if part == 0:
            mine = pid < HEAD_PROGRAMS
        else:
            mine = pid >= HEAD_PROGRAMS
        if mine:
            f = (pid - HEAD_PROGRAMS * part) * (HEAD_ROWS * (1 - part) + TAIL_ROWS * part) + tl.arange(
                0, HEAD_ROWS * (1 - part) + TAIL_ROWS * part)  # [R] the part's blocks, counted over vectors
            if WIDE:
                f = f.to(tl.int64)
            vec = f // (HEAD * (1 - part) + TAIL * part)  # [R] vector of each block
            blk = f % (HEAD * (1 - part) + TAIL * part) + HEAD * part  # [R] block index in the vector
            ok = vec < V  # [R]
            ch = blk[:, None] * QB + lane[None, :]  # [R, QB] channel index
            base = vec[:, None] * C
            x = tl.load(x_ptr + base + ch, mask=ok[:, None], other=0.0).to(tl.float32)  # [R, QB]
            if part == 0:
                v = x
            else:
                # RoPE on the trailing 2*HALF channels: pairs (2i, 2i+1) of the tail.
                # even' = even*cos - odd*sin ; odd' = even*sin + odd*cos
                # [R, QB/2, 2]: the last axis is (even, odd), so no partner load.
                row = vec // H  # [R] the cos/sin row of each block's vector
                pair = blk[:, None] * (QB // 2) + tl.arange(0, QB // 2)[None, :] - (C // 2 - HALF)  # [R, QB/2]
                rope_pair = ok[:, None] & (pair >= 0) & (pair < HALF)
                c = tl.load(cos_ptr + row[:, None] * HALF + pair, mask=rope_pair, other=1.0)
                s = tl.load(sin_ptr + row[:, None] * HALF + pair, mask=rope_pair, other=0.0)
                pairs = tl.reshape(x, (TAIL_ROWS, QB // 2, 2))
                even, odd = tl.split(pairs)
                rotated = tl.join(even * c - odd * s, even * s + odd * c)
                if ROUND_BF16:  # explicit nearest-even: the interpreter's bfloat16 cast truncates
                    bits = rotated.to(tl.int32, bitcast=True)
                    rotated = ((bits + 0x7FFF + ((bits >> 16) & 1)) & -65536).to(tl.float32, bitcast=True)
                else:
                    rotated = rotated.to(DTYPE).to(tl.float32)
                # both lanes of a pair; back to [block, lane]
                v = tl.reshape(tl.where(rope_pair[:, :, None], rotated, pairs), (TAIL_ROWS, QB))

            if FMT == 0:
                out = v
            else:
                amax = tl.max(tl.abs(v), axis=1)  # [R]
                if FMT == 2:
                    # NVFP4: scale = e4m3(max(amax, 6*2^-9) / 6), one per block; compiled, the
                    # division is the reciprocal-and-fma form below with y = RN(1/6).
                    a6 = tl.maximum(amax, 0.01171875)  # [R]
                    if HW_E4M3:
                        t0 = a6 * 0.1666666716337204
                        target = tl.math.fma(tl.math.fma(t0, -6.0, a6), 0.1666666716337204, t0)
                    else:
                        target = tl.math.div_rn(a6, 6.0)
                else:
                    # ue8m0: scale = pow2_ceil(max(amax, lo) * (1/max)), FP8 and MXFP4 constants.
                    if FMT == 1:
                        t = tl.maximum(amax, 1e-4) * (1.0 / 448.0)
                    else:
                        t = tl.maximum(amax, 6.0 * 2.0**-126) * (1.0 / 6.0)
                    tb = t.to(tl.int32, bitcast=True)
                    k = ((tb >> 23) & 0xFF) - 127 + ((tb & 0x7FFFFF) != 0).to(tl.int32)
                    scale = ((k + 127) << 23).to(tl.float32, bitcast=True)[:, None]
                    inv_scale = ((127 - k) << 23).to(tl.float32, bitcast=True)[:, None]
                    target = v * inv_scale  # [R, QB]
                    if not HW_E4M3:  # (the conversion instruction saturates by itself)
                        target = tl.minimum(tl.maximum(target, -448.0), 448.0)
                if FMT != 3:
                    # e4m3 round-to-nearest-even of `target` (saturating at 448): per element
                    # for FP8, per block for the NVFP4 scale.
                    if HW_E4M3:
                        r8 = tl.inline_asm_elementwise(_E4M3_PTX, "=f,f", [target], dtype=tl.float32,
                                                       is_pure=True, pack=1)
                    else:
                        a = tl.minimum(tl.abs(target), 448.0)
                        e = tl.maximum(((a.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127, -6)
                        spacing = ((e - 3 + 127) << 23).to(tl.float32, bitcast=True)
                        inv_spacing = ((3 - e + 127) << 23).to(tl.float32, bitcast=True)
                        r8m = ((a * inv_spacing + TWO23) - TWO23) * spacing
                        r8 = tl.where(target < 0, r8m * -1.0, r8m)  # not -r8m: see the module doc
                    if PACK:  # the e4m3 byte of r8: exponent and top mantissa bits, or m * 2^-9
                        mag8 = tl.abs(r8)
                        bits8 = mag8.to(tl.int32, bitcast=True)
                        ex8 = ((bits8 >> 23) & 0xFF) - 127
                        code8 = tl.where(ex8 >= -6, ((ex8 + 7) << 3) | ((bits8 >> 20) & 7),
                                         (mag8 * 512.0).to(tl.int32))
                        if FMT == 1:  # the sign bit of r8 (the conversion keeps a -0, the arithmetic does not)
                            code8 = code8 | ((r8.to(tl.int32, bitcast=True) >> 24) & 128)
                if FMT == 1:
                    out = r8 * scale
                else:
                    if FMT == 2:
                        scale = r8[:, None]
                        if HW_E4M3:
                            # v / scale correctly rounded without a division per element
                            # (Markstein): y = RN(1 / scale) once per block, q0 = RN(v * y), the
                            # remainder v - q0 * scale is exact in one fma, q = RN(q0 + rem * y).
                            # Compiled only: Triton's interpreter before 3.9 rounds an fma twice.
                            y = tl.math.div_rn(1.0, r8)[:, None]
                            q0 = v * y
                            q = tl.math.fma(tl.math.fma(q0 * -1.0, scale, v), y, q0)
                        else:
                            q = tl.math.div_rn(v, scale)
                    else:
                        q = v * inv_scale
                    # e2m1 spacing 0.5 / 1 / 2 below 2 / 4 / from 4 on: 2^(E - 1) with 2^E =
                    # max(m, 1) cut to its exponent bits. m + 2^(E + 22), whose float32 spacing
                    # is that step, rounds m to a multiple of it half to even (m < 2^(E + 22), so
                    # the sum stays in that binade) and taking 2^(E + 22) back off is exact: two
                    # adds where scaling by the step's inverse and back took four operations more.
                    m = tl.minimum(tl.abs(q), 6.0)
                    magic = ((tl.maximum(m.to(tl.int32, bitcast=True), 0x3F800000) & 0x7F800000)
                             + (22 << 23)).to(tl.float32, bitcast=True)
                    r4 = (m + magic) - magic
                    # q's sign onto r4 * scale (>= +0): one bitwise op instead of compare, negate
                    # and select; a -0 q gives -0, as the reference's copysign does
                    sign = q.to(tl.int32, bitcast=True) & -2147483648
                    out = ((r4 * scale).to(tl.int32, bitcast=True) | sign).to(tl.float32, bitcast=True)
            if PACK:
                scale_at = scales_ptr + vec * N_SCALES + blk  # [R]
                if FMT == 1:
                    tl.store(out_ptr + base + ch, code8.to(tl.uint8), mask=ok[:, None])
                    tl.store(scale_at, (k + 127).to(tl.uint8), mask=ok)
                else:
                    tl.store(scale_at, code8.to(tl.uint8), mask=ok)
                    idx4 = tl.where(r4 < 2.0, r4 * 2.0, tl.where(r4 < 4.0, r4 + 2.0, r4 * 0.5 + 4.0)).to(tl.int32)
                    lo, hi = tl.split(tl.reshape(idx4 | ((sign >> 28) & 8),
                                                 (HEAD_ROWS * (1 - part) + TAIL_ROWS * part, QB // 2, 2)))
                    byte = lo | (hi << 4)  # even | odd << 4
                    at = blk[:, None] * (QB // 2) + tl.arange(0, QB // 2)[None, :]
                    tl.store(out_ptr + vec[:, None] * (C // 2) + at, byte.to(tl.uint8), mask=ok[:, None])
            else:
                tl.store(out_ptr + base + ch, out.to(DTYPE), mask=ok[:, None])


def code_and_block(x: torch.Tensor, fmt: str) -> tuple[int, int]:
    """``fmt``'s kernel code and scale block, once ``x``'s channels are checked to fill
    whole blocks (``fmt`` already known to be one of FORMATS)."""
    code, block = FORMATS[fmt]
    if x.shape[-1] % block:
        raise ValueError(f"fake-quant: last dimension {x.shape[-1]} is not a multiple of block {block}")
    return code, block


class FusedRopeQuant:
    """Callable with :func:`runtime.compressor.rope_then_quant`'s signature."""

    def __init__(self, tile_elements: int | None = None, num_warps: int | None = None,
                 whole_below: int = WHOLE_BELOW, whole_calls_under: int = WHOLE_CALLS_UNDER) -> None:
        """``tile_elements`` (channels per program) and ``num_warps``, for benchmark sweeps;
        None: by vector width and call size (WIDE_FROM, TILE_ELEMENTS, FEW_WARPS_FROM).
        ``whole_below`` / ``whole_calls_under``: calls of vectors of fewer channels, and of
        fewer elements, are taken whole by the rotating programs (their head blocks pass
        the rotation unchanged) instead of in head and tail programs (0: never)."""
        for name, value in (("whole_below", whole_below), ("whole_calls_under", whole_calls_under)):
            if value < 0:
                raise ValueError(f"FusedRopeQuant.{name}: expected a count >= 0, got {value}")
        self.kernel = jit(_rope_quant_kernel)
        self.tile_elements = tile_elements
        self.num_warps = num_warps
        self.whole_below = whole_below
        self.whole_calls_under = whole_calls_under

    def whole(self, vectors: int, channels: int) -> bool:
        """Whether a call of ``vectors`` vectors of ``channels`` goes whole to the rotating
        programs (WHOLE_BELOW, WHOLE_CALLS_UNDER)."""
        return channels < self.whole_below and vectors * channels < self.whole_calls_under

    def wide(self, channels: int) -> bool:
        """Whether vectors of ``channels`` take the wide default (WIDE_FROM): no tile given."""
        return self.tile_elements is None and channels >= WIDE_FROM

    def tile(self, channels: int) -> int:
        """About how many channels' quant blocks a program takes (``channels``: the vector
        width, kept for sweeps that tile by it)."""
        return TILE_ELEMENTS if self.tile_elements is None else self.tile_elements

    def warps(self, elements: int, channels: int) -> int:
        """Warps per program for a call of ``elements`` (vectors x channels) of vectors of
        ``channels`` each."""
        if self.num_warps is not None:
            return self.num_warps
        if self.wide(channels):
            return 4
        return 4 if elements < FEW_WARPS_FROM else 2

    def __call__(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, fmt: str) -> torch.Tensor:
        if fmt not in FORMATS:
            raise ValueError(f"rope_then_quant: fmt must be 'fp8', 'nvfp4' or 'mxfp4', got {fmt!r}")
        return self._launch(x, cos, sin, *code_and_block(x, fmt))

    def pack(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, fmt: str) -> PackedKV:
        """The same rotation and quantisation, stored packed (runtime/kv_packing.py's
        layout; "fp8" or "nvfp4"): ``unpack(pack(...))`` equals ``__call__``'s values bit
        for bit, because the codes are the bytes of the very q and scale it multiplies."""
        if fmt not in PACKED_FORMATS:
            raise ValueError(f"rope_quant.pack: fmt must be one of {tuple(PACKED_FORMATS)}, got {fmt!r}")
        code, block = code_and_block(x, fmt)
        packed = PackedKV.empty(fmt, tuple(x.shape[:-1]), x.shape[-1], x.device)
        self._launch(x, cos, sin, code, block, packed)
        return packed

    def rotate_only(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """The kernel's rotated (and dtype-rounded) values without the quantiser: lets a
        test feed the reference quantiser exactly what the kernel quantised (channels in
        blocks of 16, the kernel's unit)."""
        return self._launch(x, cos, sin, ROTATE_ONLY, code_and_block(x, "nvfp4")[1])

    def _launch(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, code: int, block: int,
                packed: PackedKV | None = None) -> torch.Tensor:
        if x.dim() not in (2, 3):
            raise ValueError(f"rope_then_quant: x must be [R, C] or [R, H, C], got shape {tuple(x.shape)}")
        rows, channels = x.shape[0], x.shape[-1]
        heads = x.shape[1] if x.dim() == 3 else 1
        half = cos.shape[-1]
        if cos.shape != (rows, half) or sin.shape != (rows, half) or 2 * half > channels:
            raise ValueError(f"rope_then_quant: cos/sin must be [{rows}, <= {channels // 2}], "
                             f"got {tuple(cos.shape)} and {tuple(sin.shape)}")
        if x.dtype not in TL_DTYPES:
            raise ValueError(f"rope_then_quant: unsupported dtype {x.dtype}")
        x = x.contiguous()
        out = torch.empty_like(x) if packed is None else packed.codes
        scales = out if packed is None else packed.scales
        vectors = rows * heads
        if vectors == 0:
            return out
        grid, kwargs = self.launch(vectors, channels, half, code, block, x.dtype, packed is not None, x.is_cuda)
        self.kernel[grid](x, cos.float().contiguous(), sin.float().contiguous(), out, scales, vectors, heads, **kwargs)
        return out

    def launch(self, vectors: int, channels: int, half: int, code: int, block: int, dtype: torch.dtype,
               pack: bool, cuda: bool) -> tuple[tuple[int], dict]:
        """(grid, keyword arguments) of the launch for ``vectors`` vectors of ``channels``
        (the sm_90 compile check, tests/runtime/compile_sm90.py, compiles exactly these).
        ``cuda``: compiled for a GPU, where the e4m3 roundings use its conversion
        instruction (HW_E4M3) instead of the interpreter's arithmetic."""
        n_scales = channels // block
        # blocks from the first holding a rope channel (all of them for a call taken whole)
        tail = n_scales if self.whole(vectors, channels) else min(n_scales, -(-2 * half // block))
        head = n_scales - tail
        cap = 1 << (max(1, self.tile(channels) // block).bit_length() - 1)  # blocks per program, a power of two
        head_rows = min(cap, next_pow2(vectors * head)) if head else 1
        tail_rows = min(cap, next_pow2(vectors * tail)) if tail else 1
        head_programs = -(-vectors * head // head_rows) if head else 0
        tail_programs = -(-vectors * tail // tail_rows) if tail else 0
        return (head_programs + tail_programs,), dict(
            HEAD_PROGRAMS=head_programs, C=channels, FMT=code, QB=block, HALF=half, HEAD=head, TAIL=tail,
            HEAD_ROWS=head_rows, TAIL_ROWS=tail_rows, DTYPE=TL_DTYPES[dtype], ROUND_BF16=dtype == torch.bfloat16,
            PACK=pack, HW_E4M3=cuda and code in (1, 2), WIDE=vectors * channels >= 2**31, enable_fp_fusion=False,
            num_warps=self.warps(vectors * channels, channels),
        )
