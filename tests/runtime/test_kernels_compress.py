"""Fused compressor pooling (op "compress") and RoPE + cache fake-quant (op "rope_quant")
vs their references, on random inputs drawn fresh every run (the seed is in every failure
message). Without CUDA the kernels run through the Triton interpreter on tiny shapes
(float32, plus bfloat16 where the kernel's explicit rounding makes it meaningful); with
CUDA the same checks run at ``mid``/``flash`` shapes in bf16 and fp32.

Tolerances:
  compress    fp32: max |fused - ref| <= 1e-5 * max(1, max |ref|) (exp, rsqrt and the
              sum of squares differ in the last float32 bits; the pooling is a convex
              combination), same bound vs a float64 recompute. bf16: every element within
              2 bf16 ulps of the reference (2^-6 |ref|, three roundings that a last-bit
              float32 difference can flip) and at least 99 % of elements bit-equal.
  rope_quant  the quantiser is EXACT: fused output == the reference quantiser applied to
              the kernel's own rotated values, bit for bit, and == the full reference
              when cos=1, sin=0. The rotation: fp32 1e-6 relative, bf16 1 ulp (2^-7
              relative) vs ``apply_rope``; fused vs the full reference may differ only in
              quant blocks whose rotated inputs differ (a rounding boundary crossed).
  e4m3 / e2m1 / ue8m0 / NVFP4 scale roundings: exact, against torch's float8_e4m3fn cast
              and a nearest-grid-point search, on dense grids with every tie.
"""

from __future__ import annotations

import textwrap

import pytest
import torch

from runtime.compressor import pool_and_norm, rope_then_quant
from runtime.config import V41Config
from runtime.quant import E2M1_GRID, fake_quant_fp8_ue8m0, fake_quant_mxfp4, fake_quant_nvfp4
from runtime.rope import apply_rope

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
TINY = V41Config.preset("tiny")
MID = V41Config.preset("mid")
FLASH = V41Config.preset("flash")
QUANTISERS = {"fp8": (fake_quant_fp8_ue8m0, 32), "nvfp4": (fake_quant_nvfp4, 16), "mxfp4": (fake_quant_mxfp4, 32)}


def _interpret(monkeypatch):
    """Compiled on CUDA; without it, interpreted (set before the kernel is wrapped)."""
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")


@pytest.fixture(params=[False, True], ids=["loops", "rows_first"])
def pool_norm(monkeypatch, request):
    """The pooling kernel in both forms: its loops, and every row loaded first (ratio <= 2)."""
    _interpret(monkeypatch)
    from runtime.kernels.compress import FusedPoolNorm

    return FusedPoolNorm(rows_first=request.param)


@pytest.fixture
def rope_quant(monkeypatch):
    _interpret(monkeypatch)
    from runtime.kernels.rope_quant import FusedRopeQuant

    return FusedRopeQuant()


def randn(g, *shape, scale=1.0):
    return torch.randn(*shape, generator=g) * scale


def bf16_ulp(x: torch.Tensor) -> torch.Tensor:
    """Spacing of bfloat16 numbers at |x| (8 significant bits)."""
    _, exponent = torch.frexp(x.float().abs().clamp_min(2.0**-126))
    return torch.ldexp(torch.ones_like(x, dtype=torch.float32), exponent - 8)


# ---------------------------------------------------------------------------- compress
def pool_norm_float64(kv, gate, ratio, weight, eps, dtype):
    """Written differently from the reference: torch.softmax over the group axis in float64."""
    c = kv.shape[-1]
    probs = torch.softmax(gate.double().reshape(-1, ratio, c), dim=1)
    pooled = (probs * kv.double().reshape(-1, ratio, c)).sum(1).to(dtype).double()
    normed = (pooled / (pooled.pow(2).mean(-1, keepdim=True) + eps).sqrt()).to(dtype).double()
    return normed if weight is None else weight.double() * normed


def check_pool_norm(pool_norm, gen, groups, ratio, channels, dtype, weight_dtype=None, with_weight=True):
    seed = gen.initial_seed()
    kv = randn(gen, groups * ratio, channels).to(DEVICE)
    gate = randn(gen, groups * ratio, channels, scale=3.0).to(DEVICE)
    weight = randn(gen, channels).to(DEVICE, weight_dtype or dtype) if with_weight else None
    eps = 1e-6
    a = pool_norm(kv, gate, ratio, weight, eps, dtype)
    b = pool_and_norm(kv, gate, ratio, weight, eps, dtype)
    assert a.dtype == b.dtype and a.shape == b.shape == (groups, channels), f"{a.dtype} {a.shape} (seed {seed})"
    a, b = a.float().cpu(), b.float().cpu()
    f64 = pool_norm_float64(kv.cpu(), gate.cpu(), ratio, None if weight is None else weight.cpu(), eps, dtype)
    if b.dtype == torch.float32 and dtype == torch.float32:
        bound = 1e-5 * max(1.0, float(b.abs().max()))
        err = float((a - b).abs().max())
        assert err <= bound, f"compress fp32: max error {err:.3g} > {bound:.3g} (seed {seed})"
        err64 = float((a.double() - f64).abs().max())
        assert err64 <= bound, f"compress fp32 vs float64: max error {err64:.3g} > {bound:.3g} (seed {seed})"
    else:
        # Three bf16 roundings (pooled, normed, weight * normed). The fused sums differ from
        # torch's in the last float32 bits (fast exp, another order), so the first two may
        # each land one bf16 ulp of the *normalised* value away; the weight carries those
        # into the output (|w| ulp(normed), up to two ulps of a smaller output binade), and
        # the last rounding may flip once more. Measured on the H200 at mid (2048 groups):
        # up to 2.4 ulps of the output vs float64 where |w| < 1.
        # Without a weight there are two roundings: one ulp of each.
        normed = pool_norm_float64(kv.cpu(), gate.cpu(), ratio, None, eps, dtype).float()
        carried = 2 * weight.float().abs().cpu() * bf16_ulp(normed) if weight is not None else bf16_ulp(normed)
        for ref, what in ((b, "reference"), (f64.float(), "float64")):
            bound = carried + bf16_ulp(ref) + 1e-6 * float(ref.abs().max())
            bad = (a - ref).abs() > bound
            assert not bad.any(), (f"compress {dtype} vs {what}: {int(bad.sum())} elements beyond 2 bf16 ulps, "
                                   f"worst {float((a - ref).abs().max()):.3g} (seed {seed})")
        equal = float((a == b).float().mean())
        assert equal >= 0.99, f"compress {dtype}: only {equal:.2%} bit-equal to the reference (seed {seed})"


@pytest.mark.parametrize("groups,ratio,channels", [(1, 2, 128), (5, 2, 128), (70, 2, 128), (3, 1, 32),
                                                    (7, 4, 48), (2, 4, 128)])
def test_compress_parity_small(pool_norm, gen, groups, ratio, channels):
    check_pool_norm(pool_norm, gen, groups, ratio, channels, torch.float32)


@pytest.mark.parametrize("weight_dtype,with_weight", [(torch.bfloat16, True), (torch.float32, True), (None, False)])
def test_compress_bf16_small(pool_norm, gen, weight_dtype, with_weight):
    """bf16 latents on the interpreter: the kernel rounds to bf16 explicitly (the
    interpreter's own cast truncates), so the GPU's rounding is what is tested here."""
    check_pool_norm(pool_norm, gen, 9, 2, 128, torch.bfloat16, weight_dtype, with_weight)


@pytest.mark.parametrize("ratio,dtype,with_weight", [(1, torch.float32, True), (2, torch.float32, False),
                                                     (2, torch.bfloat16, True), (2, torch.bfloat16, False)])
def test_rows_first_is_the_loops_bit_for_bit(monkeypatch, gen, ratio, dtype, with_weight):
    """The rows-first form runs the loops' operations in the loops' order: the same bits
    (compiled where CUDA is, else interpreted), with -inf and -0 gates and -0 latents
    among the values."""
    _interpret(monkeypatch)
    from runtime.kernels.compress import FusedPoolNorm

    kv = randn(gen, 12 * ratio, 128).to(DEVICE)
    gate = randn(gen, 12 * ratio, 128, scale=3.0).to(DEVICE)
    if ratio == 2:  # a -inf gate beside a finite one (alone, its softmax is NaN in both forms)
        gate[0, :5] = float("-inf")
    gate[1, 5:9] = -0.0
    kv[2, :7] = -0.0
    weight = randn(gen, 128).to(DEVICE, dtype) if with_weight else None
    loops = FusedPoolNorm(rows_first=False)(kv, gate, ratio, weight, 1e-6, dtype)
    rows_first = FusedPoolNorm(rows_first=True)(kv, gate, ratio, weight, 1e-6, dtype)
    assert torch.equal(loops.view(torch.int16 if dtype == torch.bfloat16 else torch.int32),
                       rows_first.view(torch.int16 if dtype == torch.bfloat16 else torch.int32)), \
        f"seed {gen.initial_seed()}"


ROWS_FIRST_PTX = textwrap.dedent("""
    import triton.language as tl
    from runtime.kernels.compress import _pool_norm_kernel
    from tests.runtime.compile_sm90 import compile_sm90
    sig = {"kv_ptr": "*fp32", "gate_ptr": "*fp32", "w_ptr": "*bf16", "out_ptr": "*bf16", "G": "i32", "C": "i32",
           "eps": "fp32"}
    for rows_first in (False, True):
        for ratio in (1, 2):
            kwargs = {"RATIO": ratio, "HAS_WEIGHT": True, "DTYPE": tl.bfloat16, "OUT_DTYPE": tl.bfloat16,
                      "ROUND_BF16": True, "ROUND_BF16_OUT": True, "BLOCK_G": 1, "BLOCK_C": 512,
                      "ROWS_FIRST": rows_first, "enable_fp_fusion": False, "num_warps": 4}
            ptx = compile_sm90(_pool_norm_kernel, sig, kwargs).asm["ptx"].splitlines()
            first_exp = next(i for i, line in enumerate(ptx) if "ex2.approx" in line)
            loads = [i for i, line in enumerate(ptx) if "ld.global" in line]
            barriers = [i for i, line in enumerate(ptx) if "bar.sync" in line]
            print(int(rows_first), ratio, sum(i > first_exp for i in loads), sum(b < max(loads) for b in barriers))
""")


@pytest.mark.slow
def test_rows_first_issues_every_load_before_any_arithmetic_on_sm90(run_sm90_script):
    """What the rows-first form is for, read from the sm_90 PTX of a launch's compile
    (tests/runtime/compile_sm90.py: aligned pointers; no GPU): every global load comes
    before the first exp and no barrier comes before the last load, at 512 channels and
    ratio 1 / 2. The loops' form has the weight's layout change (a barrier) ahead of its
    gate loads, which this test tells apart (and, under the H200's Triton 3.6, kv loads
    after the first exp)."""
    stdout = run_sm90_script(ROWS_FIRST_PTX)
    found = {(rows_first, ratio): (late_loads, early_barriers) for rows_first, ratio, late_loads, early_barriers
             in (tuple(int(x) for x in line.split()) for line in stdout.strip().splitlines()[-4:])}
    assert found[1, 1] == found[1, 2] == (0, 0), stdout
    assert found[0, 1][1] >= 1 and found[0, 2][1] >= 1, stdout


def test_small_calls_take_more_warps_per_program():
    """The warp rule (FusedPoolNorm.warps): 8 warps up to FEW_PROGRAMS programs, 4 above, and
    a sweep's explicit warp count wins at every size."""
    from runtime.kernels.compress import FEW_PROGRAMS, FEW_PROGRAMS_WARPS, NUM_WARPS, FusedPoolNorm

    rule = FusedPoolNorm()
    assert [rule.warps(n) for n in (1, FEW_PROGRAMS, FEW_PROGRAMS + 1, 8 * FEW_PROGRAMS)] == [
        FEW_PROGRAMS_WARPS, FEW_PROGRAMS_WARPS, NUM_WARPS, NUM_WARPS]
    assert FEW_PROGRAMS_WARPS != NUM_WARPS
    assert {FusedPoolNorm(num_warps=2).warps(n) for n in (1, FEW_PROGRAMS + 1)} == {2}


def test_compress_rejects_partial_groups(pool_norm):
    kv = torch.zeros(5, 32, device=DEVICE)
    with pytest.raises(ValueError, match="whole groups of ratio 2"):
        pool_norm(kv, kv, 2, None, 1e-6, torch.float32)
    with pytest.raises(ValueError, match="norm weight must be"):
        pool_norm(kv[:4], kv[:4], 2, torch.ones(16, device=DEVICE), 1e-6, torch.float32)


def test_compress_empty(pool_norm):
    kv = torch.zeros(0, 32, device=DEVICE)
    assert pool_norm(kv, kv, 2, None, 1e-6, torch.float32).shape == (0, 32)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("config", [MID, FLASH], ids=["mid", "flash"])
@pytest.mark.parametrize("groups,ratio", [(1, 2), (32, 2), (2048, 2), (300, 4), (64, 1)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_compress_parity_gpu(pool_norm, gen, config, groups, ratio, dtype):
    check_pool_norm(pool_norm, gen, groups, ratio, config.head_dim, dtype)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("num_warps", [8, 16])
@pytest.mark.parametrize("config", [MID, FLASH], ids=["mid", "flash"])
@pytest.mark.parametrize("groups,ratio", [(1, 2), (32, 2), (2048, 2), (300, 4)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_compress_parity_on_more_warps_gpu(gen, num_warps, config, groups, ratio, dtype):
    """One 512-channel group per program on 8 and 16 warps (the sweep's candidates for
    small calls): each thread holds fewer channels and the norm's sum crosses more warps."""
    from runtime.kernels.compress import FusedPoolNorm

    check_pool_norm(FusedPoolNorm(num_warps=num_warps), gen, groups, ratio, config.head_dim, dtype)


# ---------------------------------------------------------------------------- rope_quant
def rope_case(gen, rows, shape_tail, half, dtype):
    """x with quant blocks of very different magnitudes (scales from 2^-20 to 2^8, some
    all-zero blocks), random angles."""
    channels = shape_tail[-1]
    x = randn(gen, rows, *shape_tail)
    block_exp = torch.randint(-20, 9, (rows, *shape_tail[:-1], channels // 16), generator=gen).float()
    x = x * torch.exp2(block_exp).repeat_interleave(16, -1)
    zero_blocks = torch.rand(rows, *shape_tail[:-1], channels // 16, generator=gen) < 0.05
    x = x.masked_fill(zero_blocks.repeat_interleave(16, -1), 0.0)
    angles = randn(gen, rows, half, scale=3.0)
    return x.to(DEVICE, dtype), angles.cos().to(DEVICE), angles.sin().to(DEVICE)


def check_rope_quant(rope_quant, gen, rows, shape_tail, half, fmt, dtype):
    seed = gen.initial_seed()
    x, cos, sin = rope_case(gen, rows, shape_tail, half, dtype)
    quant, block = QUANTISERS[fmt]

    # 1. the rotation alone, vs apply_rope
    rot = rope_quant.rotate_only(x, cos, sin)
    rot_ref = apply_rope(x, cos, sin)
    assert rot.dtype == dtype
    tol = 1e-6 if dtype == torch.float32 else 2.0**-7
    err = (rot.float() - rot_ref.float()).abs() - tol * rot_ref.float().abs()
    assert float(err.max()) <= 0.0, f"rope_quant rotation off by {float(err.max()):.3g} (seed {seed})"

    # 2. the quantiser, bit-exact, on the kernel's own rotated values
    a = rope_quant(x, cos, sin, fmt)
    assert a.dtype == x.dtype and a.shape == x.shape
    expected = quant(rot, block=block)
    diff = a != expected
    assert not diff.any(), (f"rope_quant {fmt}: {int(diff.sum())} values differ from the reference quantiser "
                            f"on the same rotated input, e.g. {a[diff][:4].tolist()} vs "
                            f"{expected[diff][:4].tolist()} (seed {seed})")

    # 3. vs the full reference: differences only inside blocks whose rotated inputs differ
    b = rope_then_quant(x, cos, sin, fmt)
    blocks_differ = (a != b).reshape(*x.shape[:-1], -1, block).any(-1)
    inputs_differ = (rot != rot_ref).reshape(*x.shape[:-1], -1, block).any(-1)
    unexplained = blocks_differ & ~inputs_differ
    assert not unexplained.any(), f"rope_quant {fmt}: {int(unexplained.sum())} blocks differ on equal inputs (seed {seed})"


SMALL_ROPE = [  # (rows, shape after rows, rope pairs, fmt): the tiny model's three uses and odd sizes
    (1, (TINY.head_dim,), TINY.qk_rope_head_dim // 2, "fp8"),
    (5, (TINY.head_dim,), TINY.qk_rope_head_dim // 2, "fp8"),
    (3, (TINY.head_dim,), TINY.qk_rope_head_dim // 2, "nvfp4"),
    (4, (TINY.index_head_dim,), TINY.qk_rope_head_dim // 2, "mxfp4"),
    (3, (TINY.index_n_heads, TINY.index_head_dim), TINY.qk_rope_head_dim // 2, "mxfp4"),
    (2, (3, 96), 8, "fp8"),
    (2, (3, 96), 8, "nvfp4"),
    (7, (5, 32), 16, "mxfp4"),
]


@pytest.mark.parametrize("rows,shape_tail,half,fmt", SMALL_ROPE)
def test_rope_quant_parity_small(rope_quant, gen, rows, shape_tail, half, fmt):
    check_rope_quant(rope_quant, gen, rows, shape_tail, half, fmt, torch.float32)


@pytest.mark.parametrize("fmt", ["fp8", "nvfp4", "mxfp4"])
def test_rope_quant_bf16_small(rope_quant, gen, fmt):
    """bf16 on the interpreter: the kernel rounds the rotated tail to bf16 explicitly (the
    interpreter's own cast truncates)."""
    check_rope_quant(rope_quant, gen, 3, (2, 64), 8, fmt, torch.bfloat16)


@pytest.mark.parametrize("shape_tail,fmt", [((MID.head_dim,), "fp8"), ((MID.head_dim,), "nvfp4"),
                                            ((MID.index_n_heads, MID.index_head_dim), "mxfp4")])
def test_rope_quant_mid_vectors_few_rows(rope_quant, gen, shape_tail, fmt):
    """The mid model's vector sizes (a few rows, so the interpreter stays quick), bf16."""
    check_rope_quant(rope_quant, gen, 4, shape_tail, MID.qk_rope_head_dim // 2, fmt, torch.bfloat16)


@pytest.mark.parametrize("fmt", ["fp8", "nvfp4", "mxfp4"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_quantiser_exact_without_rotation(rope_quant, gen, fmt, dtype):
    """cos=1, sin=0: the op is the pure quantiser, so fused == reference bit for bit."""
    x, _, _ = rope_case(gen, 6, (2, 128), 8, dtype)
    cos, sin = torch.ones(6, 8, device=DEVICE), torch.zeros(6, 8, device=DEVICE)
    a, b = rope_quant(x, cos, sin, fmt), rope_then_quant(x, cos, sin, fmt)
    diff = a != b
    assert not diff.any(), f"{fmt} {dtype}: {int(diff.sum())} values differ (seed {gen.initial_seed()})"


def quantise_rows(rope_quant, x: torch.Tensor, fmt: str) -> torch.Tensor:
    identity = torch.ones(x.shape[0], 1, device=x.device), torch.zeros(x.shape[0], 1, device=x.device)
    return rope_quant(x, *identity, fmt)


def anchored_blocks(values: torch.Tensor, anchor: float, block: int, per_row: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Blocks whose first lane is ``anchor`` (fixing the block's scale) and whose other
    lanes are ``values``; returns (x [rows, per_row * block], mask of the value lanes)."""
    lanes = block - 1
    n_blocks = -(-values.numel() // lanes)
    n_blocks = -(-n_blocks // per_row) * per_row
    padded = torch.zeros(n_blocks * lanes)
    padded[: values.numel()] = values
    x = torch.cat([torch.full((n_blocks, 1), anchor), padded.reshape(n_blocks, lanes)], 1)
    used = torch.zeros(n_blocks * lanes, dtype=torch.bool)
    used[: values.numel()] = True
    mask = torch.cat([torch.zeros(n_blocks, 1, dtype=torch.bool), used.reshape(n_blocks, lanes)], 1)
    return x.reshape(-1, per_row * block), mask.reshape(-1, per_row * block)


def e4m3_test_values() -> torch.Tensor:
    """Every e4m3 value, every midpoint (the ties), one float32 ulp either side of each,
    a dense grid of 1024 points per binade from 2^-12 to 448, the subnormal range on a
    2^-16 grid; both signs."""
    codes = torch.arange(0, 127, dtype=torch.uint8).view(torch.float8_e4m3fn).float()  # 0 ... 448
    mids = (codes[1:] + codes[:-1]) / 2
    points = torch.cat([codes, mids])
    around = torch.cat([torch.nextafter(points, torch.tensor(0.0)), torch.nextafter(points, torch.tensor(1e9))])
    dense = torch.cat([2.0**e * (1 + torch.arange(1024) / 1024) for e in range(-12, 9)])
    subnormal = torch.arange(0, 2**10) * 2.0**-16
    values = torch.cat([points, around, dense, subnormal]).clamp(max=448.0)
    return torch.cat([values, -values])


def test_e4m3_rounding_matches_torch_cast(rope_quant):
    """FP8 with a fixed scale of 1 (anchor 448 in each block: pow2_ceil(448/448) = 1) is
    the bare e4m3 rounding, compared with torch's own cast."""
    values = e4m3_test_values()
    x, mask = anchored_blocks(values, 448.0, 32, per_row=8)
    out = quantise_rows(rope_quant, x.to(DEVICE), "fp8").cpu()
    got = out[mask][: values.numel()]
    want = values.to(torch.float8_e4m3fn).float()
    bad = got != want
    assert not bad.any(), f"e4m3: {int(bad.sum())} of {values.numel()} differ, e.g. {values[bad][:5].tolist()} -> " \
                          f"{got[bad][:5].tolist()} (torch {want[bad][:5].tolist()})"
    assert float(values.abs().max()) == 448.0 and float(values[values > 0].min()) < 2.0**-10  # range covered


def test_nvfp4_scale_rounding_matches_torch_cast(rope_quant):
    """NVFP4's per-16 scale is e4m3(amax / 6): blocks whose amax runs over every e4m3
    scale, every tie between two scales and a float32 ulp around each (times 6), from
    the clamp 6*2^-9 up to 6*448; checked against the reference quantiser bit for bit
    and the scale itself (amax's own quantised value / 6) against torch's cast."""
    codes = torch.arange(1, 127, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
    mids = (codes[1:] + codes[:-1]) / 2
    targets = torch.cat([codes, mids])
    targets = torch.cat([targets, torch.nextafter(targets, torch.tensor(0.0)), torch.nextafter(targets, torch.tensor(1e9))])
    amax = (targets * 6).clamp(6 * 2.0**-9, 6 * 448.0)
    lanes = torch.linspace(-1, 1, 15)[None, :] * amax[:, None] * 0.999
    blocks = torch.cat([amax[:, None], lanes], 1)  # [n, 16], lane 0 is the amax
    rows = -(-blocks.shape[0] // 8) * 8
    x = torch.zeros(rows, 16)
    x[: blocks.shape[0]] = blocks
    x = x.reshape(-1, 8 * 16).to(DEVICE)
    got = quantise_rows(rope_quant, x, "nvfp4").cpu()
    want = fake_quant_nvfp4(x.cpu(), block=16)
    bad = got != want
    assert not bad.any(), f"nvfp4: {int(bad.sum())} values differ, e.g. {x.cpu()[bad][:4].tolist()}"
    # Where amax / 6 is a normal e4m3 number the scale is within 1/16 of it, so lane 0
    # (the amax) quantises to the top of the grid: 6 * scale exactly.
    normal = (amax / 6 >= 2.0**-6) & (amax / 6 <= 448.0)
    scale = got.reshape(-1, 16)[: blocks.shape[0], 0][normal] / 6
    torch_scale = (amax[normal] / 6).to(torch.float8_e4m3fn).float()
    assert torch.equal(scale, torch_scale), "nvfp4 scale differs from torch's e4m3 cast"


def e2m1_nearest_even(q: torch.Tensor) -> torch.Tensor:
    """Nearest point of the e2m1 grid by search, ties to the even code (index in the grid)."""
    grid = torch.tensor(E2M1_GRID)
    dist = (q.abs()[:, None] - grid[None, :]).abs()
    best = dist.min(1, keepdim=True).values
    candidates = torch.where(dist == best, torch.arange(8)[None, :], 99)
    lo = candidates.min(1).values
    hi = torch.where(candidates == 99, -1, candidates).max(1).values
    code = torch.where(lo % 2 == 0, lo, hi)
    return torch.copysign(grid[code], q)


@pytest.mark.parametrize("fmt,anchor", [("mxfp4", 6.0), ("nvfp4", 6.0)])
def test_e2m1_rounding_on_every_tie(rope_quant, fmt, anchor):
    """Scale 1 (mxfp4: pow2_ceil(6/6); nvfp4: e4m3(6/6)): the bare e2m1 rounding on a
    0.03125 grid over [-6, 6] (every tie and in between), ulps around each tie, vs a
    nearest-grid-point search."""
    grid = torch.arange(-192, 193) * 0.03125
    ties = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    around = torch.cat([ties, torch.nextafter(ties, torch.tensor(0.0)), torch.nextafter(ties, torch.tensor(9.0))])
    values = torch.cat([grid, around, -around])
    block = QUANTISERS[fmt][1]
    x, mask = anchored_blocks(values, anchor, block, per_row=4)
    got = quantise_rows(rope_quant, x.to(DEVICE), fmt).cpu()[mask][: values.numel()]
    want = e2m1_nearest_even(values)
    bad = got != want
    assert not bad.any(), f"e2m1 ({fmt}): {values[bad][:6].tolist()} -> {got[bad][:6].tolist()} (want {want[bad][:6].tolist()})"


def test_ue8m0_scales_on_powers_of_two(rope_quant, gen):
    """Blocks whose amax sits exactly on, and one ulp either side of, 448 * 2^k (FP8) and
    6 * 2^k (MXFP4) -- where pow2_ceil changes -- and the tiny-amax clamps."""
    k = torch.arange(-30, 31).float()
    for fmt, top in (("fp8", 448.0), ("mxfp4", 6.0)):
        edges = top * torch.exp2(k)
        amax = torch.cat([edges, torch.nextafter(edges, torch.tensor(0.0)), torch.nextafter(edges, torch.tensor(1e30)),
                          torch.tensor([1e-4, 5e-5, 1e-30, 6 * 2.0**-126, 0.0])])
        lanes = torch.rand(amax.numel(), 31, generator=gen) * 2 - 1
        x = torch.cat([amax[:, None], lanes * amax[:, None]], 1)
        rows = -(-x.shape[0] // 4) * 4
        xs = torch.zeros(rows, 32)
        xs[: x.shape[0]] = x
        xs = xs.reshape(-1, 128).to(DEVICE)
        got = quantise_rows(rope_quant, xs, fmt).cpu()
        want = QUANTISERS[fmt][0](xs.cpu(), block=32)
        bad = got != want
        assert not bad.any(), f"{fmt}: {int(bad.sum())} values differ (seed {gen.initial_seed()})"


def test_rope_quant_rejects_bad_input(rope_quant):
    x = torch.zeros(2, 64, device=DEVICE)
    cs = torch.zeros(2, 8, device=DEVICE)
    with pytest.raises(ValueError, match="fmt must be"):
        rope_quant(x, cs, cs, "int8")
    with pytest.raises(ValueError, match="not a multiple of block 32"):
        rope_quant(torch.zeros(2, 48, device=DEVICE), cs, cs, "fp8")
    with pytest.raises(ValueError, match="cos/sin must be"):
        rope_quant(x, cs[:1], cs[:1], "fp8")


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("config", [MID, FLASH], ids=["mid", "flash"])
@pytest.mark.parametrize("rows", [1, 64, 4096])
@pytest.mark.parametrize("use", ["window_kv", "entries", "index_keys", "index_queries"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_rope_quant_parity_gpu(rope_quant, gen, config, rows, use, dtype):
    half = config.qk_rope_head_dim // 2
    shape_tail, fmt = {
        "window_kv": ((config.head_dim,), "fp8"),
        "entries": ((config.head_dim,), "nvfp4"),
        "index_keys": ((config.index_head_dim,), "mxfp4"),
        "index_queries": ((config.index_n_heads, config.index_head_dim), "mxfp4"),
    }[use]
    check_rope_quant(rope_quant, gen, rows, shape_tail, half, fmt, dtype)
