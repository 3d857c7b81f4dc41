"""The model's own low-precision formats, as fake-quantisation (quantise, then dequantise).

V4.1 was trained with these roundings in the loop (QAT), so they are model semantics,
applied even when the weights are float32:

- FP8 window KV:     e4m3 values, one ue8m0 (power-of-two) scale per 32 channels;
- NVFP4 global KV:   e2m1 values, one e4m3 scale per 16 channels;
- MXFP4 index keys/queries: e2m1 values, one ue8m0 scale per 32 channels.

Every function maps [..., n] float -> [..., n] float of the same dtype; n must be a
multiple of the block (the config guarantees it).
"""

from __future__ import annotations

import torch

FP8_MAX = 448.0  # largest finite float8_e4m3fn
FP4_MAX = 6.0  # largest e2m1
E2M1_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def pow2_ceil(t: torch.Tensor) -> torch.Tensor:
    """ue8m0 scale rounding: the smallest power of two >= t (t > 0, float32).

    frexp gives t = m * 2^e with m in [0.5, 1); t is itself a power of two exactly when
    m == 0.5, in which case the answer is 2^(e-1), otherwise 2^e.
    """
    mantissa, exponent = torch.frexp(t.float())
    exponent = exponent - (mantissa == 0.5).to(exponent.dtype)
    return torch.ldexp(torch.ones_like(t, dtype=torch.float32), exponent)


def round_to_e2m1(q: torch.Tensor) -> torch.Tensor:
    """Round float32 values already clamped to [-6, 6] to the e2m1 grid, ties to the
    even code (0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4).

    The grid spacing is 0.5 below 2, 1 in [2, 4) and 2 from 4 on; dividing by the
    spacing (a power of two, so exact) and rounding half-to-even gives the code parity
    of the e2m1 encoding, because in each range the integer quotient and the code
    differ by an even number.
    """
    magnitude = q.abs()
    step = torch.where(magnitude < 2.0, 0.5, torch.where(magnitude < 4.0, 1.0, 2.0))
    rounded = torch.round(magnitude / step) * step
    return torch.copysign(rounded, q)


def _blocks(x: torch.Tensor, block: int) -> torch.Tensor:
    n = x.shape[-1]
    if n % block:
        raise ValueError(f"fake-quant: last dimension {n} is not a multiple of block {block}")
    return x.float().reshape(*x.shape[:-1], n // block, block)


def fp8_ue8m0_parts(x: torch.Tensor, block: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, scale) of the window KV format: q [..., n/block, block] float32 e4m3 values,
    scale [..., n/block, 1] float32 powers of two; the value is q * scale. The packed
    caches (runtime/kv_packing.py) store these two as bytes."""
    b = _blocks(x, block)  # [..., n/block, block]
    amax = b.abs().amax(-1, keepdim=True).clamp_min(1e-4)
    scale = pow2_ceil(amax * (1.0 / FP8_MAX))
    q = (b / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).float()
    return q, scale


def nvfp4_parts(x: torch.Tensor, block: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """(q, scale) of NVFP4: q [..., n/block, block] float32 on the e2m1 grid (signed, -0
    kept), scale [..., n/block, 1] float32 e4m3 values; the value is q * scale."""
    b = _blocks(x, block)
    amax = b.abs().amax(-1, keepdim=True)
    # Saturate at 448 before the cast: torch 2.13's float8 cast saturates on the CPU, but on
    # the H200 (torch 2.11, CUDA) blocks whose scale passed 448 came out NaN
    # (test_kv_packing.py's GPU run, issue 16).
    scale = (amax.clamp_min(FP4_MAX * 2.0**-9) / FP4_MAX).clamp(max=FP8_MAX).to(torch.float8_e4m3fn).float()
    q = round_to_e2m1((b / scale).clamp(-FP4_MAX, FP4_MAX))
    return q, scale


def fake_quant_fp8_ue8m0(x: torch.Tensor, block: int = 32) -> torch.Tensor:
    """FP8 e4m3 with a power-of-two scale per ``block`` channels (SWA KV)."""
    q, scale = fp8_ue8m0_parts(x, block)
    return (q * scale).reshape(x.shape).to(x.dtype)


def fake_quant_nvfp4(x: torch.Tensor, block: int = 16) -> torch.Tensor:
    """NVFP4: e2m1 values with an e4m3 scale per ``block`` channels (global KV)."""
    q, scale = nvfp4_parts(x, block)
    return (q * scale).reshape(x.shape).to(x.dtype)


def fake_quant_mxfp4(x: torch.Tensor, block: int = 32) -> torch.Tensor:
    """MXFP4: e2m1 values with a power-of-two scale per ``block`` channels (indexer)."""
    b = _blocks(x, block)
    amax = b.abs().amax(-1, keepdim=True)
    scale = pow2_ceil(amax.clamp_min(FP4_MAX * 2.0**-126) * (1.0 / FP4_MAX))
    q = round_to_e2m1((b / scale).clamp(-FP4_MAX, FP4_MAX))
    return (q * scale).reshape(x.shape).to(x.dtype)
