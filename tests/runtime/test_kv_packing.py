"""Packed KV layout (runtime/kv_packing.py) and the fused rope_quant's pack on write
(runtime/kernels/rope_quant.py, ``FusedRopeQuant.pack``).

The oracles: the fake-quant functions of runtime/quant.py (the values a dequantized
cache holds; compared through the integer view, so the sign of zero counts too) and a
float64 recompute of every code from the format definitions (e4m3: sign, 4-bit exponent
with bias 7, 3-bit mantissa, exponent 0 subnormal; e2m1: the 8-value grid; ue8m0: 2^(b -
127)), so the decoding is not checked against itself.
"""

from __future__ import annotations

import pytest
import torch

from runtime.kv_packing import PackedKV, e2m1_values, e4m3_values, encode, pack, unpack
from runtime.quant import E2M1_GRID, fake_quant_fp8_ue8m0, fake_quant_nvfp4

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
FAKE = {"fp8": (fake_quant_fp8_ue8m0, 32), "nvfp4": (fake_quant_nvfp4, 16)}
BITS = {torch.float32: torch.int32, torch.bfloat16: torch.int16}


@pytest.fixture
def rope_quant(monkeypatch):
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.kernels.rope_quant import FusedRopeQuant

    return FusedRopeQuant()


def bitwise(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and torch.equal(a.view(BITS[a.dtype]), b.view(BITS[b.dtype]))


def blocks_case(gen, rows: int, channels: int, block: int) -> torch.Tensor:
    """Rows of blocks at very different scales: random normal blocks times 2^-40 .. 2^40
    (tiny ones below both formats' amax clamps, huge ones far past 448 and 6), all-zero
    blocks, all-negative-zero blocks, and blocks of one nonzero value among zeros."""
    x = torch.randn(rows, channels, generator=gen)
    n = channels // block
    exp = torch.randint(-40, 41, (rows, n), generator=gen).float()
    x = x * torch.exp2(exp).repeat_interleave(block, -1)
    x[0, :block] = 0.0
    x[0, block : 2 * block] = -0.0
    x[1, :block] = 0.0
    x[1, 3] = -2.0**-30
    x[1, block : 2 * block] = -x[1, block : 2 * block].abs()  # every sign negative
    return x


def e4m3_float64(code: int) -> float:
    sign = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 15, code & 7
    return sign * ((m / 8) * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))


def test_every_code_decodes_as_the_format_defines():
    """All 254 finite e4m3 bytes, all 16 e2m1 codes, and the ue8m0 scales in use, vs float64."""
    codes = torch.tensor([c for c in range(256) if c & 0x7F != 0x7F], dtype=torch.uint8)
    got = e4m3_values(codes).double()
    want = torch.tensor([e4m3_float64(int(c)) for c in codes], dtype=torch.float64)
    assert torch.equal(got, want) and torch.equal(torch.signbit(got), torch.signbit(want))
    nibbles = torch.arange(16)
    want4 = torch.tensor([(-1.0 if c & 8 else 1.0) * E2M1_GRID[c & 7] for c in range(16)], dtype=torch.float64)
    got4 = e2m1_values(nibbles).double()
    assert torch.equal(got4, want4) and torch.equal(torch.signbit(got4), torch.signbit(want4))
    # ue8m0 scale bytes through unpack: one value 1.0 (e4m3 byte 0x38) per block
    scales = torch.arange(100, 160, dtype=torch.uint8)[:, None]
    p = PackedKV(torch.full((60, 32), 0x38, dtype=torch.uint8), scales, "fp8")
    assert unpack(p).double()[:, 0].tolist() == [2.0 ** (int(b) - 127) for b in scales[:, 0]]


@pytest.mark.parametrize("fmt", ["fp8", "nvfp4"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_pack_unpack_is_the_fake_quant_bit_for_bit(gen, fmt, dtype):
    fake, block = FAKE[fmt]
    x = blocks_case(gen, 24, 128, block).to(dtype)
    p = pack(x, fmt)
    assert p.codes.dtype == p.scales.dtype == torch.uint8
    assert p.codes.shape == (24, 128 if fmt == "fp8" else 64) and p.scales.shape == (24, 128 // block)
    assert p.channels == 128
    got = unpack(p, dtype)
    assert bitwise(got, fake(x)), f"{fmt} {dtype} (seed {gen.initial_seed()})"
    # negative zeros survive: the sign bit of every zero of the fake quant
    want = fake(x)
    assert torch.equal(torch.signbit(got[want == 0]), torch.signbit(want[want == 0]))


def test_nibble_order_low_is_the_even_channel():
    """Channel 0 = 0.5 (code 1), channel 1 = -6 (code 15): byte 0xF1; scale 1.0 (e4m3 0x38)."""
    x = torch.zeros(1, 16)
    x[0, 0], x[0, 1] = 0.5, -6.0
    p = pack(x, "nvfp4")
    assert int(p.codes[0, 0]) == 0xF1 and int(p.scales[0, 0]) == 0x38
    assert int(p.codes[0, 1:].max()) == 0


@pytest.mark.parametrize("fmt", ["fp8", "nvfp4"])
def test_encode_of_fake_quantised_values_is_exact(gen, fmt):
    """What ``DecodeSlab.load`` does with a state's cache, including NVFP4 blocks whose
    scale fell in e4m3's subnormal range (requantising them would move values)."""
    fake, block = FAKE[fmt]
    x = blocks_case(gen, 32, 64, block)
    x[2, :block] = 0.0
    x[2, 0] = 9.6 * 2.0**-9  # NVFP4: scale 2^-8, q = 4; requantised: 8 * 2^-9 -> 6 * 2^-9
    v = fake(x)
    assert bitwise(encode(v, fmt).unpack(), v), f"seed {gen.initial_seed()}"
    if fmt == "nvfp4":
        assert float(unpack(pack(v, fmt))[2, 0]) != float(v[2, 0])  # why encode searches scales


@pytest.mark.parametrize("fmt", ["fp8", "nvfp4"])
def test_encode_refuses_values_off_the_grid(fmt):
    x = torch.zeros(2, 32)
    x[1, 5] = 0.3 if fmt == "nvfp4" else 1.0 + 2.0**-6  # between two codes at every scale that fits
    x[1, 6] = 1.0
    with pytest.raises(ValueError, match=rf"packed KV: \d+ values are not on the {fmt} grid"):
        encode(x, fmt)


def test_layout_errors_are_one_line():
    with pytest.raises(ValueError, match="not a multiple of the nvfp4 block 16"):
        pack(torch.zeros(2, 24), "nvfp4")
    with pytest.raises(ValueError, match="fmt must be one of"):
        pack(torch.zeros(2, 32), "mxfp4")


@pytest.mark.parametrize("fmt", ["fp8", "nvfp4"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_pack_unpacks_to_the_fused_values(rope_quant, gen, fmt, dtype):
    """The kernel's PACK variant stores the bytes of the very values its plain variant
    returns (bit for bit), and those bytes are the torch layout's for the kernel's own
    rotated input (the kernel writes +0 where torch keeps an input's -0: same value)."""
    _, block = FAKE[fmt]
    x = blocks_case(gen, 6, 64, block).to(DEVICE, dtype)
    angles = torch.randn(6, 8, generator=gen)
    cos, sin = angles.cos().to(DEVICE), angles.sin().to(DEVICE)
    p = rope_quant.pack(x, cos, sin, fmt)
    assert bitwise(p.unpack(dtype), rope_quant(x, cos, sin, fmt)), f"seed {gen.initial_seed()}"
    ref = pack(rope_quant.rotate_only(x, cos, sin), fmt)
    assert torch.equal(p.scales, ref.scales)
    assert torch.equal(p.unpack(), ref.unpack())  # values (== treats -0 as 0)
    if fmt == "fp8":
        assert torch.equal(p.codes | 0x80, ref.codes | 0x80)  # only zeros' sign bits may differ
    with pytest.raises(ValueError, match="rope_quant.pack: fmt must be one of"):
        rope_quant.pack(x, cos, sin, "mxfp4")


def test_packing_quant_reference_is_rope_then_quant(gen):
    """The reference write of a packed slab (runtime/static/packing.py): RoPE, then pack;
    unpacked it is rope_then_quant bit for bit; other formats pass through."""
    from runtime.compressor import rope_then_quant
    from runtime.static.packing import PackingQuant

    x = blocks_case(gen, 5, 64, 32)
    angles = torch.randn(5, 8, generator=gen)
    cos, sin = angles.cos(), angles.sin()
    quant = PackingQuant(rope_then_quant)
    for fmt in ("fp8", "nvfp4"):
        assert bitwise(quant(x, cos, sin, fmt).unpack(), rope_then_quant(x, cos, sin, fmt))
    assert bitwise(quant(x, cos, sin, "mxfp4"), rope_then_quant(x, cos, sin, "mxfp4"))
