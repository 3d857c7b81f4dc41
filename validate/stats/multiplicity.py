"""Family-wise error control across all (optimization x task) comparisons of one decision.

- Bonferroni: p_adj = min(1, m p).
- Holm (step-down): sort p ascending, p_adj_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)).
  Uniformly more powerful than Bonferroni with the same family-wise guarantee.
- none: no adjustment. Defensible only when the release needs *every* critical claim
  (an intersection-union test controls the error of a GO at alpha without adjustment);
  the report always names which correction ran.

``effective_alpha`` gives, per hypothesis, the level at which it was effectively tested
(alpha * p / p_adj), so confidence bounds can be reported at that level and agree with
the adjusted decision: bound clears the margin exactly when p_adj <= alpha.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from validate.errors import StatsInputError
from validate.gate_limits import CORRECTIONS  # noqa: F401  (re-exported: defined once, light)

Correction = Literal["holm", "bonferroni", "none"]


def bonferroni(pvalues) -> np.ndarray:
    """min(1, m p) over the last axis (each row of a 2-D array is one family)."""
    p = np.atleast_1d(np.asarray(pvalues, dtype=np.float64))
    return np.minimum(1.0, p * p.shape[-1])


def holm(pvalues) -> np.ndarray:
    """Holm's step-down over the last axis (each row of a 2-D array is one family, so
    a power simulation adjusts all its draws at once)."""
    p = np.atleast_1d(np.asarray(pvalues, dtype=np.float64))
    m = p.shape[-1]
    order = np.argsort(p, axis=-1, kind="stable")
    ordered = np.take_along_axis(p, order, axis=-1)
    scaled = np.minimum(1.0, (m - np.arange(m)) * ordered)  # (m - j + 1) p_(j), j from 1
    adjusted_sorted = np.maximum.accumulate(scaled, axis=-1)
    out = np.empty_like(p)
    np.put_along_axis(out, order, adjusted_sorted, axis=-1)
    return out


def adjust(pvalues, method: str) -> np.ndarray:
    if method == "holm":
        return holm(pvalues)
    if method == "bonferroni":
        return bonferroni(pvalues)
    if method == "none":
        return np.asarray(pvalues, dtype=np.float64).copy()
    raise StatsInputError(f"correction must be one of {', '.join(CORRECTIONS)}, got {method!r}")


def effective_alpha(alpha: float, pvalues, adjusted) -> np.ndarray:
    """alpha * p / p_adj per hypothesis (alpha itself where p_adj is 0)."""
    p = np.asarray(pvalues, dtype=np.float64)
    pa = np.asarray(adjusted, dtype=np.float64)
    safe = np.where(pa > 0, pa, 1.0)
    return np.where(pa > 0, alpha * p / safe, alpha)
