"""Input errors of the speed metrics (ValueError family, one line each)."""

from __future__ import annotations


class SpeedError(ValueError):
    """Speed inputs are unusable (no timed request, a bad concurrency level, ...)."""
