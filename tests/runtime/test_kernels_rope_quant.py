"""The fused RoPE + fake-quant (runtime/kernels/rope_quant.py) at both warp counts its
default picks (4 below FusedRopeQuant's FEW_WARPS_FROM elements, 2 from there up),
against the reference ``runtime.compressor.rope_then_quant`` and each other.

The warp count only changes how a program's tile is spread over threads, so the two
must give the same bits (compared through the integer view: the sign of zero counts
too), for every format, for float32 and bfloat16 inputs (a bf16 tensor makes the kernel
round the rotated tail to bf16 itself, ROUND_BF16), in ``pack``'s codes and scale bytes,
and on vector counts that leave the last program partly empty. Against the reference
the checks are test_kernels_compress.py's: the quantiser is exact on the kernel's own
rotated values, and blocks may differ only where the rotated inputs do; ``pack``
unpacks to the plain values bit for bit and matches runtime/kv_packing.py's ``pack`` of
the kernel's rotated values (test_kv_packing.py's checks).

Without CUDA the kernels run through the Triton interpreter (set per test, before the
kernels are wrapped), so the shapes are tiny; a small ``tile_elements`` gives several
programs per launch.
"""

from __future__ import annotations

import pytest
import torch

from runtime.compressor import rope_then_quant
from runtime.kv_packing import pack
from runtime.quant import fake_quant_fp8_ue8m0, fake_quant_mxfp4, fake_quant_nvfp4
from runtime.rope import apply_rope

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
QUANTISERS = {"fp8": (fake_quant_fp8_ue8m0, 32), "nvfp4": (fake_quant_nvfp4, 16), "mxfp4": (fake_quant_mxfp4, 32)}
BITS = {torch.float32: torch.int32, torch.bfloat16: torch.int16}
TILE = 256  # channels per program: 2 to 16 vectors here, so most launches end on a ragged program
WARPS = (4, 2)  # the two counts the default picks between

CASES = [  # (rows, shape after rows, rope pairs): 2-D and 3-D, padded channel counts, rope over all of it
    (5, (96,), 8),  # 96 channels pad to 128 lanes; 5 vectors of 2 per program
    (3, (3, 64), 8),  # 9 vectors of 4
    (7, (5, 32), 16),  # the rope covers the whole vector; 35 vectors of 8 or 16
    (2, (128,), 1),  # a single rope pair
]


@pytest.fixture
def kernels(monkeypatch):
    """{warps: FusedRopeQuant}: compiled on CUDA, interpreted without it."""
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.kernels.rope_quant import FusedRopeQuant

    # head / tail programs at every size: the small calls here would otherwise all go whole
    # (test_whole_vectors_bit_for_bit compares the two)
    return {w: FusedRopeQuant(tile_elements=TILE, num_warps=w, whole_below=0) for w in WARPS}


def case(gen, rows: int, tail: tuple[int, ...], half: int, dtype: torch.dtype):
    """Blocks of 16 at scales 2^-40 .. 2^40 (past both formats' clamps and 448), all-zero
    and all-negative-zero blocks, random angles."""
    x = torch.randn(rows, *tail, generator=gen)
    blocks = x.shape[:-1] + (tail[-1] // 16,)
    x = x * torch.exp2(torch.randint(-40, 41, blocks, generator=gen).float()).repeat_interleave(16, -1)
    x = x.masked_fill((torch.rand(blocks, generator=gen) < 0.05).repeat_interleave(16, -1), 0.0)
    x = x.masked_fill((torch.rand(blocks, generator=gen) < 0.05).repeat_interleave(16, -1), -0.0)
    angles = torch.randn(rows, half, generator=gen) * 3.0
    return x.to(DEVICE, dtype), angles.cos().to(DEVICE), angles.sin().to(DEVICE)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(BITS[a.dtype]), b.view(BITS[b.dtype]))


def assert_same_outputs(a, b, x, cos, sin, seed: int) -> None:
    """Two RoPE + quant ops give the same rotated values, quantised values (every format)
    and packed bytes, bit for bit."""
    assert same_bits(a.rotate_only(x, cos, sin), b.rotate_only(x, cos, sin)), f"rotation (seed {seed})"
    for fmt in QUANTISERS:
        assert same_bits(a(x, cos, sin, fmt), b(x, cos, sin, fmt)), f"{fmt} (seed {seed})"
    for fmt in ("fp8", "nvfp4"):
        p, q = a.pack(x, cos, sin, fmt), b.pack(x, cos, sin, fmt)
        assert torch.equal(p.codes, q.codes) and torch.equal(p.scales, q.scales), f"{fmt} pack (seed {seed})"


def test_default_warps_by_call_size():
    from runtime.kernels.rope_quant import FEW_WARPS_FROM, FusedRopeQuant

    default = FusedRopeQuant()
    assert default.warps(64 * 128, 128) == 4 and default.warps(FEW_WARPS_FROM - 1, 128) == 4
    assert default.warps(FEW_WARPS_FROM, 128) == 2 and default.warps(4096 * 32 * 128, 128) == 2
    assert default.warps(4096 * 512, 512) == 4  # wide vectors: 4 warps at every size
    assert FusedRopeQuant(num_warps=8).warps(4096 * 32 * 128, 128) == 8  # an explicit count wins
    assert FusedRopeQuant(num_warps=4).warps(FEW_WARPS_FROM, 128) == 4
    assert FusedRopeQuant(tile_elements=1024).warps(4096 * 512, 512) == 2  # an explicit tile: by size


def test_default_tile_by_vector_width():
    """1,024 channels' quant blocks per program in every format. A call's head blocks
    (before the first rope channel) and tail blocks are counted over all its vectors, each
    part in programs of its own, the head's first; a part smaller than a tile takes one
    program of its block count rounded up to a power of two. An explicit tile wins."""
    import torch

    from runtime.kernels.rope_quant import FORMATS, FusedRopeQuant

    default = FusedRopeQuant()
    # (fmt, channels, head blocks, tail blocks, blocks per program): a 64-channel rope tail
    for fmt, channels, head, tail, rows in (("fp8", 512, 14, 2, 32), ("nvfp4", 512, 28, 4, 64),
                                            ("mxfp4", 128, 2, 2, 32)):
        code, block = FORMATS[fmt]
        grid, kwargs = default.launch(4096, channels, 32, code, block, torch.bfloat16, False, cuda=True)
        assert (kwargs["HEAD"], kwargs["TAIL"], kwargs["HEAD_ROWS"], kwargs["TAIL_ROWS"]) == (head, tail, rows, rows)
        assert kwargs["HEAD_PROGRAMS"] == 4096 * head // rows and grid == (4096 * (head + tail) // rows,), fmt
    # 8 vectors of 512 FP8 channels: 112 head blocks in 4 programs of 32, 16 tail blocks in
    # one of 16; with 2,048-channel tiles 2 programs of 64 and one of 16
    grid, kwargs = default.launch(8, 512, 32, *FORMATS["fp8"], torch.bfloat16, False, cuda=True)
    assert (kwargs["HEAD_ROWS"], kwargs["TAIL_ROWS"], kwargs["HEAD_PROGRAMS"], grid) == (32, 16, 4, (5,))
    grid, kwargs = FusedRopeQuant(tile_elements=2048).launch(8, 512, 32, *FORMATS["fp8"], torch.bfloat16, False,
                                                             cuda=True)
    assert (kwargs["HEAD_ROWS"], kwargs["TAIL_ROWS"], kwargs["HEAD_PROGRAMS"], grid) == (64, 16, 2, (3,))
    # one vector whose rope covers it all: no head programs
    grid, kwargs = default.launch(1, 64, 32, *FORMATS["nvfp4"], torch.bfloat16, False, cuda=True)
    assert (kwargs["HEAD"], kwargs["TAIL"], kwargs["HEAD_PROGRAMS"], kwargs["TAIL_ROWS"], grid) == (0, 4, 0, 4, (1,))


def test_small_calls_of_narrow_vectors_go_whole():
    """By default calls of vectors under 512 channels and under 2^16 elements are all tail
    blocks (no head programs); wider vectors, or larger calls, keep their head / tail
    split; a negative bound is refused."""
    import torch

    from runtime.kernels.rope_quant import FORMATS, FusedRopeQuant

    op = FusedRopeQuant()
    grid, kwargs = op.launch(16, 128, 32, *FORMATS["mxfp4"], torch.bfloat16, False, cuda=True)
    assert (kwargs["HEAD"], kwargs["TAIL"], kwargs["HEAD_PROGRAMS"], kwargs["TAIL_ROWS"], grid) == (0, 4, 0, 32, (2,))
    assert op.whole(511, 128) and not op.whole(512, 128)  # 2^16 elements
    grid, kwargs = op.launch(512, 128, 32, *FORMATS["mxfp4"], torch.bfloat16, False, cuda=True)
    assert (kwargs["HEAD"], kwargs["TAIL"], kwargs["HEAD_PROGRAMS"], grid) == (2, 2, 32, (64,))
    grid, kwargs = op.launch(16, 512, 32, *FORMATS["nvfp4"], torch.bfloat16, False, cuda=True)
    assert (kwargs["HEAD"], kwargs["TAIL"], kwargs["HEAD_PROGRAMS"]) == (28, 4, 7)
    assert not FusedRopeQuant(whole_below=0).whole(1, 128)
    assert FusedRopeQuant(whole_calls_under=2**62).whole(4096 * 32, 128)
    for name in ("whole_below", "whole_calls_under"):
        with pytest.raises(ValueError, match=name):
            FusedRopeQuant(**{name: -1})


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows,tail,half", CASES)
def test_whole_vectors_bit_for_bit(kernels, gen, rows, tail, half, dtype):
    """Whole vectors in the rotating programs (bounds past every call here) give
    the head / tail programs' rotated values, quantised values and packed bytes: a head
    block through the rotation path is left as it was loaded."""
    from runtime.kernels.rope_quant import FusedRopeQuant

    split = kernels[4]
    whole = FusedRopeQuant(tile_elements=TILE, num_warps=4, whole_below=4096, whole_calls_under=2**62)
    assert_same_outputs(whole, split, *case(gen, rows, tail, half, dtype), gen.initial_seed())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows,tail,half", CASES)
def test_warps_bit_for_bit(kernels, gen, rows, tail, half, dtype):
    """2 and 4 warps: the same rotated values, quantised values, and packed bytes."""
    assert_same_outputs(kernels[2], kernels[4], *case(gen, rows, tail, half, dtype), gen.initial_seed())


@pytest.mark.parametrize("warps", WARPS)
@pytest.mark.parametrize("fmt", list(QUANTISERS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_against_the_reference(kernels, gen, fmt, dtype, warps):
    """test_kernels_compress.py's parity: rotation vs ``apply_rope``, quantiser exact on
    the kernel's rotated values, the full reference equal wherever the rotated inputs of
    a block are."""
    fused = kernels[warps]
    quant, block = QUANTISERS[fmt]
    x, cos, sin = case(gen, 3, (3, 64), 8, dtype)
    seed = gen.initial_seed()
    rot, rot_ref = fused.rotate_only(x, cos, sin), apply_rope(x, cos, sin)
    tol = 1e-6 if dtype == torch.float32 else 2.0**-7
    assert float(((rot.float() - rot_ref.float()).abs() - tol * rot_ref.float().abs()).max()) <= 0.0, f"seed {seed}"
    a = fused(x, cos, sin, fmt)
    assert torch.equal(a, quant(rot, block=block)), f"{fmt}: quantiser (seed {seed})"
    blocks_differ = (a != rope_then_quant(x, cos, sin, fmt)).reshape(*x.shape[:-1], -1, block).any(-1)
    inputs_differ = (rot != rot_ref).reshape(*x.shape[:-1], -1, block).any(-1)
    assert not (blocks_differ & ~inputs_differ).any(), f"{fmt}: blocks differ on equal inputs (seed {seed})"


@pytest.mark.parametrize("warps", WARPS)
@pytest.mark.parametrize("fmt", ["fp8", "nvfp4"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows,tail,half", [(5, (96,), 8), (3, (3, 64), 8)])
def test_pack_unpacks_to_the_values(kernels, gen, rows, tail, half, fmt, dtype, warps):
    """``pack``'s bytes unpack to the plain call's values bit for bit, and are
    runtime/kv_packing.py's ``pack`` of the kernel's own rotated values (up to the sign
    of zero)."""
    fused = kernels[warps]
    x, cos, sin = case(gen, rows, tail, half, dtype)
    p = fused.pack(x, cos, sin, fmt)
    seed = gen.initial_seed()
    assert same_bits(p.unpack(dtype), fused(x, cos, sin, fmt)), f"{fmt} unpack (seed {seed})"
    ref = pack(fused.rotate_only(x, cos, sin), fmt)  # test_kv_packing.py's checks: the kernel writes +0
    assert torch.equal(p.scales, ref.scales), f"{fmt} scales vs kv_packing (seed {seed})"  # where torch keeps -0
    assert torch.equal(p.unpack(), ref.unpack()), f"{fmt} values vs kv_packing (seed {seed})"
    if fmt == "fp8":
        assert torch.equal(p.codes | 0x80, ref.codes | 0x80), f"fp8 codes vs kv_packing (seed {seed})"


def e4m3_values() -> torch.Tensor:
    """Every positive finite e4m3 value, 2^-9 .. 448, ascending (float32)."""
    return torch.arange(1, 127, dtype=torch.uint8).view(torch.float8_e4m3fn).float()


def edges(points: torch.Tensor) -> torch.Tensor:
    """Each point and its two float32 neighbours, both signs."""
    up, down = torch.nextafter(points, points + 1), torch.nextafter(points, points * 0)
    around = torch.cat([points, up, down])
    return torch.cat([around, around * -1.0])


def blocks_of(lead: torch.Tensor, values: list[torch.Tensor], block: int) -> torch.Tensor:
    """One row of blocks per (lead, values) pair: lane 0 the lead (which sets the block's
    scale), the values after it, zero padding; [n, 64] float32 vectors of 64 channels."""
    rows = []
    for first, rest in zip(lead.tolist(), values, strict=True):
        for chunk in rest.split(block - 1):
            rows.append(torch.cat([torch.tensor([first]), chunk, torch.zeros(block - 1 - len(chunk))]))
    flat = torch.stack(rows).reshape(-1)
    flat = torch.cat([flat, torch.zeros(-len(flat) % 64)])
    return flat.reshape(-1, 64)


@pytest.mark.parametrize("fmt", ["nvfp4", "fp8"])
def test_rounding_edges(kernels, fmt):
    """Values at and one float32 step either side of every rounding boundary the kernel
    decides: NVFP4, the e2m1 midpoints (0.25 .. 5) times every e4m3 scale, so that q = v /
    scale sits on or next to a tie (the compiled kernel divides by a reciprocal and an
    fma correction, the interpreter with div_rn; either must round like torch's division);
    FP8, every e4m3 midpoint and grid value under scales 2^-3 .. 2^3 (the compiled kernel
    rounds with the GPU's conversion instruction, the interpreter with arithmetic). Against
    the reference quantiser and ``pack``'s bytes, with an identity rotation."""
    fused = kernels[4]
    grid = e4m3_values()
    if fmt == "nvfp4":
        ties = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
        x = blocks_of(6.0 * grid, [edges(ties * s) for s in grid.tolist()], 16)
    else:
        points = torch.cat([grid, (grid[1:] + grid[:-1]) / 2]).clamp(max=448.0)
        x = blocks_of(448.0 * 2.0 ** torch.arange(-3.0, 4.0), [edges(points * 2.0**k) for k in range(-3, 4)], 32)
    x = x.to(DEVICE)
    cos, sin = torch.ones(len(x), 8, device=DEVICE), torch.zeros(len(x), 8, device=DEVICE)
    quant, block = QUANTISERS[fmt]
    assert torch.equal(fused(x, cos, sin, fmt), quant(x, block=block)), fmt
    p, ref = fused.pack(x, cos, sin, fmt), pack(x, fmt)
    assert torch.equal(p.scales, ref.scales) and torch.equal(p.unpack(), ref.unpack()), f"{fmt} pack"


@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("fmt", list(QUANTISERS))
def test_production_launch_at_4096_rows_gpu(gen, fmt, dtype):
    """The default launch (tile, warps) at the model's shapes, 4,096 rows: the compiled
    roundings against the reference quantiser on the kernel's rotated values, for ~2M
    values over 2^-40 .. 2^40, and ``pack`` against runtime/kv_packing.py's."""
    from runtime.kernels.rope_quant import FusedRopeQuant

    fused = FusedRopeQuant()
    tail = (16, 128) if fmt == "mxfp4" else (512,)
    x, cos, sin = case(gen, 4096, tail, 32, dtype)
    quant, block = QUANTISERS[fmt]
    seed = gen.initial_seed()
    rot = fused.rotate_only(x, cos, sin)
    assert torch.equal(fused(x, cos, sin, fmt), quant(rot, block=block)), f"{fmt} (seed {seed})"
    if fmt != "mxfp4":
        p, ref = fused.pack(x, cos, sin, fmt), pack(rot, fmt)
        assert torch.equal(p.scales, ref.scales), f"{fmt} scales (seed {seed})"
        assert torch.equal(p.unpack(), ref.unpack()), f"{fmt} pack values (seed {seed})"
