"""The ranges of the gate's inputs, in one place and light (no numpy: the command line
checks its flags before any statistics load).

The policy parser (``validate.gate.policy``) and ``v41val plan``'s flag checks
(``validate.sizing_request``) give the same range in the same words.
"""

from __future__ import annotations

CORRECTIONS: tuple[str, ...] = ("holm", "bonferroni", "none")
MAX_MARGIN_POINTS = 50.0  # a margin is accuracy points in (0, 50]
GATE_ALPHA_RANGE = "(0, 0.5)"  # one-sided: 0.5 or more would PASS a coin flip


def gate_alpha_problem(alpha: float) -> str | None:
    """Why ``alpha`` cannot be the gate's one-sided level, or None (callers prefix the
    field: ``gate.alpha`` or ``--alpha``)."""
    if not 0.0 < alpha < 0.5:
        return f"expected a number in {GATE_ALPHA_RANGE} (the one-sided level), got {alpha}"
    return None
