"""Per-prompt fidelity records -> the analysis' ``FidelitySummary``.

Tokens of one prompt are not independent (one early difference shifts every later
position), so the SEs of the token means are clustered by prompt
(``validate.stats.proportions.clustered_se``); the p99 is over all tokens.

A broken variant can give non-finite logits (NaN from a read of a never-written cache
slot, or -inf where the baseline has mass), so a position's KL can be NaN or +inf. Such
positions are counted (``n_nonfinite``), stored as JSON null, and make the KL mean and
p99 undefined (None) rather than being averaged over the finite rest, which would hide
the breakage; top-1 agreement stays defined (a NaN row agrees with nothing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from validate.fidelity.errors import FidelityError
from validate.fidelity.metrics import first_divergence
from validate.fidelity.types import FidelitySummary
from validate.stats.proportions import clustered_se

EXACT = "exact full-vocab"


def topk_method(k: int) -> str:
    return f"top-k approx k={k} (lower bound)"


@dataclass(frozen=True)
class PromptFidelity:
    """One prompt: KL and top-1 agreement at each teacher-forced position."""

    item_id: str
    kl: tuple[float, ...]
    top1: tuple[bool, ...]

    def __post_init__(self) -> None:
        if len(self.kl) != len(self.top1):
            raise FidelityError(f"fidelity {self.item_id}: {len(self.kl)} KL values but "
                                f"{len(self.top1)} top-1 flags")

    @classmethod
    def from_dict(cls, row: dict) -> PromptFidelity:
        """Inverse of ``to_dict``: a stored null KL is a non-finite position (NaN)."""
        return cls(row["item_id"], tuple(math.nan if x is None else float(x) for x in row["kl"]),
                   tuple(row["top1"]))

    @property
    def first_divergence(self) -> int | None:
        return first_divergence(np.asarray(self.top1, dtype=bool))

    def to_dict(self) -> dict:
        return {"item_id": self.item_id, "kl": [x if math.isfinite(x) else None for x in self.kl],
                "top1": list(self.top1),
                "first_divergence": self.first_divergence}


def summarize(records: Sequence[PromptFidelity], method: str) -> FidelitySummary:
    """Mean +- SE (clustered by prompt) and p99 of KL; top-1 agreement; divergence."""
    used = [r for r in records if r.kl]
    if not used:
        return FidelitySummary(method=method, n_prompts=len(records), n_tokens=0, kl_mean=None,
                               kl_se=None, kl_p99=None, top1_agreement=None,
                               top1_agreement_se=None)
    kl = np.concatenate([np.asarray(r.kl, dtype=np.float64) for r in used])  # (N,)
    top1 = np.concatenate([np.asarray(r.top1, dtype=np.float64) for r in used])  # (N,)
    clusters = np.concatenate([np.full(len(r.kl), k) for k, r in enumerate(used)])  # (N,)
    diverged = [r.first_divergence for r in used if r.first_divergence is not None]
    nonfinite = int((~np.isfinite(kl)).sum())
    return FidelitySummary(
        method=method, n_prompts=len(used), n_tokens=int(kl.size),
        kl_mean=None if nonfinite else float(kl.mean()),
        kl_se=None if nonfinite else _se(kl, clusters),
        kl_p99=None if nonfinite else float(np.percentile(kl, 99)),
        top1_agreement=float(top1.mean()), top1_agreement_se=_se(top1, clusters),
        first_divergence_mean=float(np.mean(diverged)) if diverged else None,
        first_divergence_median=float(np.median(diverged)) if diverged else None,
        n_diverged=len(diverged), n_nonfinite=nonfinite,
    )


def _se(values: np.ndarray, clusters: np.ndarray) -> float | None:
    se = clustered_se(values, clusters)
    return None if np.isnan(se) else float(se)
