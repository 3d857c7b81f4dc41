"""Planted degradations for self-tests: can the toolkit see what it claims to?

A ``Perturbation`` turns a healthy variant into a known-broken one, by a set amount:

- ``drop_window``: the sliding window loses its oldest ``drop_window`` tokens (W ->
  W - drop): the model reads a view of the shared weights whose config says the
  smaller window, so every SWA read of every layer sees less context (the weights
  themselves are not copied). A real architectural degradation, graded by size.
- ``logit_noise``: Gaussian noise of standard deviation ``logit_noise`` added to every
  row of the model's output logits (a stand-in for a fused op whose output is off by a
  set amount). The noise of a row depends only on ``seed``, the row's position and the
  tokens fed so far, so it does not change with batch composition.

Applied by the builtin engine (plan variants' ``perturb`` table:
``perturb = { logit_noise = 0.5 }``); ``v41val calibrate`` plants them at increasing
sizes and reports which sizes the fidelity metrics and the gate catch.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from validate.errors import ValidateInputError

KEYS = {"drop_window": int, "logit_noise": float, "seed": int}


@dataclass(frozen=True)
class Perturbation:
    drop_window: int = 0
    logit_noise: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.drop_window < 0:
            raise ValidateInputError(f"perturb.drop_window: expected >= 0, got {self.drop_window}")
        if not 0 <= self.logit_noise < math.inf:  # NaN and inf would make every logit NaN
            raise ValidateInputError(f"perturb.logit_noise: expected a finite number >= 0, got "
                                     f"{self.logit_noise}")

    @property
    def active(self) -> bool:
        return self.drop_window > 0 or self.logit_noise > 0

    def to_dict(self) -> dict:
        return {"drop_window": self.drop_window, "logit_noise": self.logit_noise,
                "seed": self.seed}

    def apply_weights(self, weights):
        """``weights`` itself, or a view of it whose config has the shrunk window."""
        if not self.drop_window:
            return weights
        window = weights.config.sliding_window
        if self.drop_window >= window:
            raise ValidateInputError(f"perturb.drop_window: {self.drop_window} must be smaller "
                                     f"than the window of {window} tokens")
        return WindowView(weights, weights.config.replace(sliding_window=window - self.drop_window))

    def wrap(self, model):
        """``model`` itself, or a view of it that adds the logit noise."""
        return NoisyLogits(model, self.logit_noise, self.seed) if self.logit_noise else model


def perturbation_from(table: Mapping[str, Any]) -> Perturbation:
    """A ``Perturbation`` from a plan's ``perturb`` table (unknown keys are errors)."""
    for key, value in table.items():
        if key not in KEYS:
            raise ValidateInputError(f"perturb.{key}: unknown key (expected one of "
                                     f"{sorted(KEYS)})")
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ValidateInputError(f"perturb.{key}: expected a number, got {value!r}")
        if KEYS[key] is int and int(value) != value:
            raise ValidateInputError(f"perturb.{key}: expected an integer, got {value!r}")
    return Perturbation(**{k: KEYS[k](v) for k, v in table.items()})


class WindowView:
    """The shared weights under a config with a smaller sliding window (no copy)."""

    def __init__(self, weights, config) -> None:
        self._weights = weights
        self.config = config

    def __getattr__(self, name: str):
        return getattr(self._weights, name)


class NoisyLogits:
    """Delegates everything to ``model``; ``forward`` adds seeded noise to the logits."""

    def __init__(self, model, std: float, seed: int) -> None:
        self._model = model
        self._std = float(std)
        self._seed = int(seed)

    def __getattr__(self, name: str):
        return getattr(self._model, name)

    def forward(self, chunks):
        starts = [chunk.state.num_computed for chunk in chunks]
        outputs = self._model.forward(chunks)
        for chunk, start, out in zip(chunks, starts, outputs, strict=True):
            n = out.logits.shape[0]
            first = start + chunk.tokens.shape[0] - n  # position of the first returned row
            for r in range(n):
                end = first + r + 1  # tokens [0, end) condition this row
                g = torch.Generator().manual_seed(self._row_seed(chunk.state.tokens[:end]))
                noise = torch.randn(out.logits.shape[1], generator=g) * self._std
                out.logits[r] += noise.to(out.logits.device, out.logits.dtype)
        return outputs

    def _row_seed(self, tokens: torch.Tensor) -> int:
        digest = hashlib.blake2b(tokens.detach().cpu().numpy().tobytes(),
                                 digest_size=8, key=self._seed.to_bytes(8, "little")).digest()
        return int.from_bytes(digest, "little") & ((1 << 63) - 1)
