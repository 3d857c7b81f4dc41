"""Input errors of the fidelity metrics (ValueError family, one line each)."""

from __future__ import annotations


class FidelityError(ValueError):
    """Fidelity inputs do not fit together (shapes, lengths, missing logprobs)."""
