"""Packed KV caches: the window KV and the global KV entries as the release stores them
(bytes), with the plain torch pack / unpack that defines the layout.

Why: the runtime's fake-quantised caches hold each value in the model dtype (2 bytes in
bf16); the formats need ~1.03 bytes (FP8 window) and ~0.56 bytes (NVFP4 global) per
value, and decode attention is bound by the bytes it reads. The static decode slab can
hold these bytes instead (``RuntimeOptions.kv_storage = "packed"``) and the fused ring
attention decodes them in-kernel (runtime/kernels/attention.py).

Layout (``PackedKV``, ``codes`` and ``scales`` both uint8):
- "fp8" (window KV): codes [..., C] e4m3 bytes (sign, 4-bit exponent with bias 7, 3-bit
  mantissa; exponent 0 is subnormal, m * 2^-9; the NaN code is never written: values
  saturate at 448), scales [..., C/32] ue8m0 bytes (the scale is 2^(byte - 127));
- "nvfp4" (global KV entries): codes [..., C/2] with two e2m1 codes per byte, channel 2i
  in the low nibble and 2i+1 in the high one (bit 3 the sign, bits 0-2 the index into
  runtime.quant.E2M1_GRID), scales [..., C/16] e4m3 bytes.

Exact: the unpacked value is q * scale with q and scale the quantiser's own parts
(runtime.quant's ``fp8_ue8m0_parts`` / ``nvfp4_parts``), a product that float32 and bf16
hold exactly (e4m3 times a power of two; e2m1 times e4m3 has at most 5 significant
bits), so ``unpack(pack(x))`` equals ``fake_quant_*(x)`` bit for bit, negative zeros
included (tests/runtime/test_kv_packing.py).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from runtime.quant import E2M1_GRID, fp8_ue8m0_parts, nvfp4_parts

FORMATS = {"fp8": 32, "nvfp4": 16}  # fmt -> channels per scale byte
E4M3_SUBNORMAL_STEP = 2.0**-9
UE8M0_BIAS = 127


class PackedKV(NamedTuple):
    """One packed cache: ``codes`` and ``scales`` uint8 (shapes in the module docstring).
    A tuple, so ``runtime.static.graphs.slab_tensors`` finds both tensors."""

    codes: torch.Tensor
    scales: torch.Tensor
    fmt: str

    @classmethod
    def zeros(cls, fmt: str, lead: tuple[int, ...], channels: int, device) -> PackedKV:
        """All-zero values of ``lead + (channels,)`` (code 0 is +0 in both formats)."""
        return cls.alloc(fmt, lead, channels, device, torch.zeros)

    @classmethod
    def empty(cls, fmt: str, lead: tuple[int, ...], channels: int, device) -> PackedKV:
        """Uninitialised bytes (for a kernel that writes every one)."""
        return cls.alloc(fmt, lead, channels, device, torch.empty)

    @classmethod
    def alloc(cls, fmt: str, lead: tuple[int, ...], channels: int, device, make) -> PackedKV:
        block = _block(fmt, channels)
        width = channels if fmt == "fp8" else channels // 2
        kw = dict(dtype=torch.uint8, device=device)
        return cls(make(*lead, width, **kw), make(*lead, channels // block, **kw), fmt)

    @property
    def channels(self) -> int:
        return self.codes.shape[-1] * (1 if self.fmt == "fp8" else 2)

    def head(self, n: int) -> PackedKV:
        """The first ``n`` rows of the leading axis (the slab's slots 0..n-1)."""
        return PackedKV(self.codes[:n], self.scales[:n], self.fmt)

    def nbytes(self) -> int:
        return self.codes.numel() + self.scales.numel()

    def unpack(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return unpack(self, dtype)


def _block(fmt: str, channels: int) -> int:
    if fmt not in FORMATS:
        raise ValueError(f"packed KV: fmt must be one of {tuple(FORMATS)}, got {fmt!r}")
    block = FORMATS[fmt]
    if channels % block:
        raise ValueError(f"packed KV: {channels} channels is not a multiple of the {fmt} block {block}")
    return block


def e4m3_bytes(v: torch.Tensor) -> torch.Tensor:
    """float32 values already on the e4m3 grid -> their bytes (torch's own encoding)."""
    return v.to(torch.float8_e4m3fn).view(torch.uint8)


def e4m3_values(codes: torch.Tensor) -> torch.Tensor:
    """uint8 e4m3 bytes -> float32."""
    return codes.view(torch.float8_e4m3fn).float()


def e2m1_codes(q: torch.Tensor) -> torch.Tensor:
    """float32 values on the signed e2m1 grid -> 4-bit codes (int64): the grid index
    (0.5 steps below 2, 1 below 4, then 2) and bit 3 for the sign (of -0 too)."""
    m = q.abs()
    index = torch.where(m < 2.0, m * 2.0, torch.where(m < 4.0, m + 2.0, m * 0.5 + 4.0)).long()
    return index | (torch.signbit(q).long() << 3)


def e2m1_values(codes: torch.Tensor) -> torch.Tensor:
    """4-bit codes -> float32 (-0 for code 8)."""
    grid = torch.tensor(E2M1_GRID, dtype=torch.float32, device=codes.device)
    magnitude = grid[(codes & 7).long()]
    return torch.where((codes & 8) != 0, -magnitude, magnitude)


def pack(x: torch.Tensor, fmt: str) -> PackedKV:
    """x [..., C] (any float dtype) -> its quantisation in ``fmt``, packed."""
    channels = x.shape[-1]
    block = _block(fmt, channels)
    lead = x.shape[:-1]
    if fmt == "fp8":
        q, scale = fp8_ue8m0_parts(x, block)  # [..., C/32, 32], [..., C/32, 1]
        _, exponent = torch.frexp(scale)  # scale = 0.5 * 2^exponent exactly
        scales = (exponent - 1 + UE8M0_BIAS).to(torch.uint8).reshape(*lead, channels // block)
        return PackedKV(e4m3_bytes(q).reshape(*lead, channels), scales, fmt)
    q, scale = nvfp4_parts(x, block)
    return _nvfp4_bytes(q, scale, lead, channels, block)


def _nvfp4_bytes(q: torch.Tensor, scale: torch.Tensor, lead, channels: int, block: int) -> PackedKV:
    """e2m1 values q [..., C/block, block] and e4m3 scales [..., C/block, 1] -> their bytes."""
    codes = e2m1_codes(q).reshape(*lead, channels // 2, 2)  # [..., C/2, (even, odd)]
    nibbles = (codes[..., 0] | (codes[..., 1] << 4)).to(torch.uint8)
    return PackedKV(nibbles, e4m3_bytes(scale).reshape(*lead, channels // block), "nvfp4")


def unpack(p: PackedKV, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """PackedKV -> [..., C] values in ``dtype`` (equal to the fake-quant of what was packed)."""
    block = FORMATS[p.fmt]
    lead = p.codes.shape[:-1]
    channels = p.channels
    if p.fmt == "fp8":
        q = e4m3_values(p.codes).reshape(*lead, channels // block, block)
        scale = torch.ldexp(torch.ones(p.scales.shape, device=p.codes.device), p.scales.long() - UE8M0_BIAS)
    else:
        low, high = p.codes & 15, p.codes >> 4
        q = e2m1_values(torch.stack([low, high], dim=-1)).reshape(*lead, channels // block, block)
        scale = e4m3_values(p.scales)
    return (q * scale.float()[..., None]).reshape(*lead, channels).to(dtype)


def encode(values: torch.Tensor, fmt: str) -> PackedKV:
    """Values already on ``fmt``'s grid (a fake-quantised cache: ``SequenceState``'s) ->
    bytes that unpack to them exactly; a ValueError if some block has no such encoding.

    Quantising again is not always exact for NVFP4: a block whose scale was rounded in
    e4m3's subnormal range can have max |q| < 6 (e.g. amax = 9.6 * 2^-9: scale 2^-8,
    q = 4), and requantising its max 8 * 2^-9 picks the scale 2^-9, where 8 clamps to 6.
    The original scale is max|v| / max|q| for some grid value max|q|, so the candidates
    max|v| / g for g in 6, 4, 3, 2, 1.5, 1, 0.5 contain one that encodes the block; the
    first valid one is taken (6 in every block with an unclamped scale). FP8 with a ue8m0
    scale requantises exactly (the new scale is the old one or half of it, and halving
    keeps every e4m3 code's double on the grid); checked like NVFP4 all the same."""
    channels = values.shape[-1]
    block = _block(fmt, channels)
    v = values.float()
    if fmt == "fp8":
        out = pack(v, fmt)
    else:
        lead = v.shape[:-1]
        b = v.reshape(*lead, channels // block, block)
        vmax = b.abs().amax(-1, keepdim=True)
        chosen = torch.zeros_like(vmax)
        found = torch.zeros_like(vmax, dtype=torch.bool)
        for g in (6.0, 4.0, 3.0, 2.0, 1.5, 1.0, 0.5):
            scale = vmax / g
            q = b / scale
            ok = ((e4m3_values(e4m3_bytes(scale)) == scale)
                  & (e2m1_values(e2m1_codes(q)) * scale == b).all(-1, keepdim=True) & (vmax > 0))
            chosen = torch.where(ok & ~found, scale, chosen)
            found = found | ok
        chosen = torch.where(vmax > 0, chosen, 2.0**-9)  # an all-zero block: any scale, codes 0 (signs kept)
        q = torch.where(vmax > 0, b / chosen, torch.copysign(torch.zeros_like(b), b))
        out = _nvfp4_bytes(q, chosen, lead, channels, block)
    back = unpack(out, torch.float32)
    if not torch.equal(back, v):
        bad = int((back != v).sum())
        raise ValueError(f"packed KV: {bad} values are not on the {fmt} grid (not a fake-quantised cache?)")
    return out
