"""The fidelity result type, beside the code that produces it (``validate.fidelity.summary``);
the analysis (``validate.analysis.model``) re-exports it."""

from __future__ import annotations

from dataclasses import dataclass

from validate.stats.jsonable import ToDict


@dataclass(frozen=True)
class FidelitySummary(ToDict):
    """Teacher-forced closeness of a variant to the baseline on the same prompts."""

    method: str  # "exact full-vocab" | "top-k approx k=<k>"
    n_prompts: int
    n_tokens: int
    kl_mean: float | None
    kl_se: float | None
    kl_p99: float | None
    top1_agreement: float | None
    top1_agreement_se: float | None
    first_divergence_mean: float | None = None
    first_divergence_median: float | None = None
    n_diverged: int = 0
    n_nonfinite: int = 0  # positions whose KL is NaN/inf (kl_* are then None)
