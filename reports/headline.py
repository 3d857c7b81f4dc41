"""The "headline operating points" section: its part of the report document, and the
table cells every human-facing renderer (terminal, Markdown, HTML) prints.

Per variant: the low-latency point (one user alone: median decode tokens/s and median
TTFT) and the throughput point (the highest aggregate tokens/s of the concurrency
sweep at which the ``user_quantile`` quantile of users still decodes at >= the target
rate, with that concurrency), then the ratios vs the baseline with their paired CIs.
A run without a sweep has ``"headline": null`` and every renderer says "not measured".
"""

from __future__ import annotations

from reports import fmt

TITLE = "Headline operating points"
NOT_MEASURED = (f"{TITLE}: not measured (the plan has no [speed] table, or its [speed] "
                "runs interleaved rounds alone)")
COLUMNS = ("variant", "1-user tok/s p50", "1-user TTFT p50", "tok/s at target", "concurrency",
           "user tok/s at q", "1-user tok/s p50 ratio [CI]", "1-user TTFT p50 speed-up [CI]",
           "throughput ratio")
POINT_COLUMNS = COLUMNS[:6]
RATIO_COLUMNS = (COLUMNS[0], *COLUMNS[6:])


def _speedup(s) -> dict | None:
    if s is None:
        return None
    return {"ratio": s.ratio, "ci": None if s.ci is None else list(s.ci), "n": s.n,
            "statistic": getattr(s, "statistic", None)}


def _point(p) -> dict:
    s = p.summary
    return {"concurrency": p.concurrency, "n_requests": s.n_requests, "n_failed": p.n_failed,
            "output_tokens_per_s": s.output_tokens_per_s,
            "tokens_per_s_per_user": s.tokens_per_s_per_user,
            "user_rate_at_quantile": p.user_rate_at_quantile,
            "ttft_p50_s": None if s.ttft_s is None else s.ttft_s.p50,
            "meets_target": p.meets_target}


def headline_document(section, baseline: str) -> dict | None:
    """The document's ``headline`` value for ``RunAnalysis.headline`` (None: no sweep)."""
    if section is None:
        return None
    variants = [{
        "variant": h.variant, "is_baseline": h.variant == baseline,
        "single_stream_tokens_per_s": h.single_stream_tokens_per_s,
        "single_stream_ttft_s": h.single_stream_ttft_s,
        "throughput_at_target": h.throughput_at_target,
        "concurrency_at_target": h.concurrency_at_target,
        "tokens_per_s_per_user_at_target": h.tokens_per_s_per_user_at_target,
        "points": [_point(p) for p in section.points.get(h.variant, ())],
    } for h in section.headlines]
    comparisons = [{
        "variant": c.variant, "baseline": c.baseline,
        "single_stream_speedup": _speedup(c.single_stream_speedup),
        "ttft_speedup": _speedup(c.ttft_speedup),
        "throughput_ratio": _speedup(c.throughput_ratio),
    } for c in section.comparisons]
    return {"target_tokens_per_s_per_user": section.target_tokens_per_s_per_user,
            "user_quantile": section.user_quantile, "settings": dict(section.settings),
            "variants": variants, "comparisons": comparisons}


def title(headline: dict) -> str:
    """'Headline operating points (target: >= 90 % of users decode at >= 150 tok/s)'."""
    share = 100.0 * (1.0 - headline["user_quantile"])
    return (f"{TITLE} (target: >= {share:g} % of users decode at >= "
            f"{headline['target_tokens_per_s_per_user']:g} tok/s)")


def _rate(x) -> str:
    return fmt.DASH if fmt.missing(x) else f"{x:.1f}"


def rows(headline: dict) -> list[dict]:
    """One dict per variant (column -> text), baseline first as the document has it."""
    by_variant = {c["variant"]: c for c in headline["comparisons"]}
    out = []
    for v in headline["variants"]:
        c = by_variant.get(v["variant"])
        reached = v["throughput_at_target"] is not None
        out.append({
            "variant": v["variant"],
            "1-user tok/s p50": _rate(v["single_stream_tokens_per_s"]),
            "1-user TTFT p50": fmt.seconds(v["single_stream_ttft_s"]),
            "tok/s at target": _rate(v["throughput_at_target"]) if reached else "none met",
            "concurrency": fmt.DASH if v["concurrency_at_target"] is None
            else str(v["concurrency_at_target"]),
            "user tok/s at q": _rate(v["tokens_per_s_per_user_at_target"]),
            "1-user tok/s p50 ratio [CI]": "baseline" if v["is_baseline"]
            else fmt.ratio(c and c["single_stream_speedup"]),
            "1-user TTFT p50 speed-up [CI]": "baseline" if v["is_baseline"]
            else fmt.ratio(c and c["ttft_speedup"]),
            "throughput ratio": "baseline" if v["is_baseline"]
            else fmt.ratio(c and c["throughput_ratio"]),
        })
    return out


FOOTNOTE = ("Speed sweep on synthetic prompts (not the quality pass). 1-user: concurrency 1 "
            "(median decode tok/s, median TTFT); tok/s at target: the highest aggregate "
            "output tok/s of the sweep whose per-user rate at quantile q still meets the "
            "target, at that concurrency ('none met': no level did). Ratios > 1 are faster "
            "and are ratios of the medians shown (TTFT: baseline / variant; rates: variant / "
            "baseline), the same statistic as the quality-pass speed-ups; CIs are paired "
            "bootstrap over the same synthetic requests; the throughput ratio is one "
            "measurement window per variant, so it has no CI.")
