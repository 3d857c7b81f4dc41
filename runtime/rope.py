"""Rotary embeddings of V4.1: interleaved pairs on the trailing ``qk_rope_head_dim``
channels of a vector, two variants and an inverse.

- "main" (ratio-0 layers): theta = rope_theta, no scaling;
- "compress" (layers with a compressed branch, and the compressed entries/index keys):
  theta = compress_rope_theta with YaRN frequency blending; YaRN's mscale is NOT applied.

cos/sin are tabulated per absolute position in fixed blocks, so a position gets the same
float32 values whichever chunk or batch asks for it (part of exactness).
"""

from __future__ import annotations

import math

import torch

from runtime.config import V41Config, YarnScaling

TABLE_BLOCK = 1024  # positions per cos/sin block


def default_inv_freq(rope_dim: int, theta: float) -> torch.Tensor:
    """theta^(-2i/d) for i < d/2, float32 [rope_dim/2]."""
    exponents = torch.arange(0, rope_dim, 2, dtype=torch.float64) / rope_dim
    return (1.0 / theta**exponents).float()


def yarn_inv_freq(rope_dim: int, theta: float, yarn: YarnScaling) -> torch.Tensor:
    """YaRN: high-frequency pairs keep theta^(-2i/d) (extrapolate), low-frequency pairs
    are divided by ``factor`` (interpolate), with a linear ramp between the pair
    indices where the wavelength fits beta_fast ... beta_slow rotations into the
    original context."""

    def pair_index_for(rotations: float) -> float:
        # The pair whose wavelength makes `rotations` turns over the original context.
        return (rope_dim * math.log(yarn.original_max_position_embeddings / (rotations * 2 * math.pi))) / (
            2 * math.log(theta)
        )

    low = max(math.floor(pair_index_for(yarn.beta_fast)), 0)
    high = min(math.ceil(pair_index_for(yarn.beta_slow)), rope_dim - 1)
    if low == high:
        high += 0.001
    half = rope_dim // 2
    ramp = ((torch.arange(half, dtype=torch.float64) - low) / (high - low)).clamp(0.0, 1.0)
    extrapolate = 1.0 - ramp  # 1: keep the original frequency
    base = 1.0 / theta ** (torch.arange(0, rope_dim, 2, dtype=torch.float64) / rope_dim)
    blended = (base / yarn.factor) * (1.0 - extrapolate) + base * extrapolate
    return blended.float()


class RopeTable:
    """cos/sin [positions, rope_dim/2] for one variant, grown in fixed blocks."""

    def __init__(self, inv_freq: torch.Tensor):
        self.inv_freq = inv_freq  # float32 [r/2]
        self._cos: list[torch.Tensor] = []
        self._sin: list[torch.Tensor] = []
        self._cat: tuple[torch.Tensor, torch.Tensor] | None = None

    def _grow(self, n_positions: int) -> None:
        while len(self._cos) * TABLE_BLOCK < n_positions:
            start = len(self._cos) * TABLE_BLOCK
            pos = torch.arange(start, start + TABLE_BLOCK, dtype=torch.float32)
            angles = pos[:, None] * self.inv_freq[None, :]  # [B, r/2], one rounding
            self._cos.append(torch.cos(angles))
            self._sin.append(torch.sin(angles))
            self._cat = None

    def lookup(self, positions: torch.Tensor, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [*positions.shape, r/2] on ``device``."""
        need = int(positions.max().item()) + 1 if positions.numel() else 1
        self._grow(need)
        if self._cat is None or self._cat[0].device != device:
            self._cat = (torch.cat(self._cos).to(device), torch.cat(self._sin).to(device))
        idx = positions.to(device).long()
        return self._cat[0][idx], self._cat[1][idx]


class RopePair:
    """The model's two RoPE tables ("main" and "compress")."""

    def __init__(self, config: V41Config):
        r = config.qk_rope_head_dim
        self.rope_dim = r
        self.main = RopeTable(default_inv_freq(r, config.rope_theta))
        compress = (
            yarn_inv_freq(r, config.compress_rope_theta, config.rope_scaling)
            if config.rope_scaling is not None
            else default_inv_freq(r, config.compress_rope_theta)
        )
        self.compress = RopeTable(compress)

    def table(self, ratio: int) -> RopeTable:
        return self.compress if ratio > 0 else self.main


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """Rotate adjacent pairs (x[2i], x[2i+1]) of the trailing rope slice of ``x``.

    x: [T, ..., d]; cos/sin: [T, r/2] (broadcast over middle dims). ``inverse`` rotates
    by -angle, which removes the query's rotation from an attention output.
    """
    r = cos.shape[-1] * 2
    while cos.dim() < x.dim():
        cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    if inverse:
        sin = -sin
    nope, rope = x[..., :-r], x[..., -r:].float()
    even, odd = rope[..., 0::2], rope[..., 1::2]
    rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
    return torch.cat([nope, rotated.to(x.dtype)], dim=-1)
