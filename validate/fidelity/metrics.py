"""Per-token fidelity from full logits (exact).

At teacher-forced position j both models see the same tokens (prompt + the baseline's
first j output tokens); their next-token distributions are P (baseline) and Q
(variant), rows of ``softmax(logits)``:

    KL(P || Q) = sum_v P(v) * (log P(v) - log Q(v))        >= 0, 0 iff P == Q

computed in float64 from log-softmax (terms with P(v) = 0 contribute 0). Top-1
agreement: argmax P == argmax Q. First divergence of greedy outputs: greedy decoding
of the variant reproduces the baseline's greedy tokens up to the first position whose
argmax differs, so it is the first position where top-1 agreement fails (or None).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from validate.fidelity.errors import FidelityError

if TYPE_CHECKING:  # torch only where logits exist: the analysis (and so ``report``) reads
    import torch  # stored records through ``first_divergence`` and never loads it


def _check(base: torch.Tensor, variant: torch.Tensor) -> None:
    if base.dim() != 2 or base.shape != variant.shape:
        raise FidelityError(f"fidelity: logits must both be [tokens, vocab]; got "
                            f"{tuple(base.shape)} and {tuple(variant.shape)}")


def kl_per_token(base: torch.Tensor, variant: torch.Tensor) -> np.ndarray:
    """KL(P || Q) per row; ``base``/``variant``: logits [T, V] -> (T,) float64."""
    import torch

    _check(base, variant)
    log_p = torch.log_softmax(base.double(), dim=-1)  # [T, V]
    log_q = torch.log_softmax(variant.double(), dim=-1)  # [T, V]
    p = log_p.exp()
    terms = torch.where(p > 0, p * (log_p - log_q), torch.zeros_like(p))  # [T, V]
    return terms.sum(dim=-1).clamp_min(0.0).numpy()


def top1_agreement(base: torch.Tensor, variant: torch.Tensor) -> np.ndarray:
    """argmax P == argmax Q per row (ties go to the lowest id on both sides) -> (T,) bool."""
    _check(base, variant)
    return (_argmax(base) == _argmax(variant)).numpy()


def _argmax(logits: torch.Tensor) -> torch.Tensor:
    import torch

    best = logits.max(dim=-1, keepdim=True).values
    ids = torch.arange(logits.shape[-1]).expand_as(logits)
    return torch.where(logits == best, ids, logits.shape[-1]).min(dim=-1).values


def first_divergence(agreement: np.ndarray) -> int | None:
    """First position where top-1 agreement fails (None: the greedy outputs agree)."""
    misses = np.flatnonzero(~np.asarray(agreement, dtype=bool))
    return int(misses[0]) if misses.size else None


def first_token_difference(a: list[int] | tuple, b: list[int] | tuple) -> int | None:
    """First index where two token sequences differ; a strict prefix differs at its end."""
    for k, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return k
    return None if len(a) == len(b) else min(len(a), len(b))
