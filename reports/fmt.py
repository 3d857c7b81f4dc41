"""Number formatting shared by every renderer, so the terminal, Markdown, HTML and JUnit
say the same thing in the same words. All inputs are the report document's units
(fractions, seconds, candidate-over-baseline speed-ups); ``None`` prints as an en dash."""

from __future__ import annotations

import math

DASH = "–"


def missing(x) -> bool:
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def pts(x, digits: int = 2, signed: bool = False) -> str:
    """A fraction as accuracy points: 0.0123 -> '1.23'."""
    if missing(x):
        return DASH
    return f"{100.0 * x:+.{digits}f}" if signed else f"{100.0 * x:.{digits}f}"


def interval_pts(ci, digits: int = 2) -> str:
    if ci is None or missing(ci[0]) or missing(ci[1]):
        return DASH
    return f"[{pts(ci[0], digits, True)}, {pts(ci[1], digits, True)}]"


def pvalue(p) -> str:
    if missing(p):
        return DASH
    if p < 1e-4:
        return "<0.0001"
    return f"{p:.2g}" if p < 0.01 else f"{p:.2f}"


def seconds(x) -> str:
    if missing(x):
        return DASH
    if x < 1.0:
        return f"{1000.0 * x:.3g} ms"
    return f"{x:.3g} s"


def ratio(r) -> str:
    if r is None or missing(r.get("ratio")):
        return DASH
    lo, hi = (r.get("ci") or (None, None))
    core = f"{r['ratio']:.2f}x"
    return core if missing(lo) or missing(hi) else f"{core} [{lo:.2f}, {hi:.2f}]"


def latency_change(r) -> str:
    """A latency speed-up ratio (baseline / candidate) as the change of the latency:
    1.6x faster -> '-38 %'."""
    if r is None or missing(r.get("ratio")) or r["ratio"] <= 0:
        return DASH
    return f"{round(100.0 * (1.0 / r['ratio'] - 1.0)):+d} %"


def throughput_change(r) -> str:
    if r is None or missing(r.get("ratio")):
        return DASH
    return f"{round(100.0 * (r['ratio'] - 1.0)):+d} %"


def margin_points(margin) -> str:
    """0.01 -> '1.0' (the policy's own unit)."""
    return DASH if missing(margin) else f"{100.0 * margin:.1f}"


def kl(x) -> str:
    return DASH if missing(x) else f"{x:.3g}"


def fraction(x, digits: int = 1) -> str:
    return DASH if missing(x) else f"{100.0 * x:.{digits}f} %"
