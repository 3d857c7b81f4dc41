"""The headline section of an analysed run, from the sweeps the runner stored.

Each stored sweep keeps every request's timings, so the analysis rebuilds the
``SweepResult`` (``validate.speed.stored``) and computes the headline and the paired
comparison vs the baseline with the same functions the runner used: the numbers a
report shows come from the stored measurements, never from a cached conclusion. Only
sweeps run with the plan's current ``[speed]`` settings count.
"""

from __future__ import annotations

from collections.abc import Mapping

from validate.analysis.model import HeadlineSection
from validate.stats.bootstrap import BootstrapSpec
from validate.store import ResultsStore


def expected_settings(doc: Mapping) -> dict | None:
    """The settings a sweep of this stored plan was run with (the runner's
    ``sweep_settings``: the [speed] table less ``rounds``, and the plan seed); None
    without [speed] or with rounds alone."""
    speed = doc.get("speed")
    if not speed or not speed.get("sweep_levels"):  # no [speed], or rounds alone
        return None
    # the runner keys a sweep without ``rounds`` (rounds_pass's own), so must this
    return {**{k: v for k, v in dict(speed).items() if k != "rounds"}, "seed": doc.get("seed", 0)}


def headline_section(store: ResultsStore, plan_hash: str, doc: Mapping, baseline: str,
                     variants: tuple[str, ...], alpha: float,
                     bootstrap: BootstrapSpec) -> tuple[HeadlineSection | None, list[str]]:
    """(the section or None when nothing was swept, notes about missing sweeps)."""
    # validate.speed imports validate.analysis.model: import it here, not at the top
    from validate.speed.headline import compare_headlines, headline
    from validate.speed.stored import sweep_from_record

    settings = expected_settings(doc)
    if settings is None:
        return None, []
    stored = {s.variant: s for s in store.sweeps(plan_hash) if s.settings == settings}
    swept = {v: sweep_from_record(stored[v].sweep) for v in variants if v in stored}
    missing = [v for v in variants if v not in swept]
    notes = [f"headline: no stored sweep for {', '.join(missing)} (the run stopped before "
             f"its sweep; rerun the plan to measure it)"] if missing else []
    if not swept:
        return None, notes
    comparisons = []
    if baseline in swept:
        comparisons = [compare_headlines(swept[baseline], swept[v], variant_name=v,
                                         baseline_name=baseline, alpha=alpha,
                                         bootstrap=bootstrap) for v in swept if v != baseline]
    return HeadlineSection(
        settings=settings, target_tokens_per_s_per_user=float(settings["target_tokens_per_s"]),
        user_quantile=float(settings["user_quantile"]),
        headlines=tuple(headline(s, v) for v, s in swept.items()),
        comparisons=tuple(comparisons),
        points={v: s.points for v, s in swept.items()}), notes


def _side(speedup) -> int:
    """+1 when the CI is above 1 (faster), -1 below (slower), 0 when it covers 1."""
    if speedup is None or speedup.ci is None:
        return 0
    lo, hi = speedup.ci
    return 1 if lo > 1.0 else -1 if hi < 1.0 else 0


def ttft_disagreements(section: HeadlineSection | None, rows) -> list[str]:
    """Notes where the quality pass and the speed sweep disagree on a variant's TTFT.

    Both are ratios of median TTFT with paired CIs, but of different workloads: the
    quality pass serves the task prompts at the engine's concurrency (warm runs hit the
    prefix cache), the sweep's single-stream point serves synthetic prompts one at a
    time. When their CIs sit on opposite sides of 1 the report says so next to both,
    instead of letting one table silently contradict the other."""
    if section is None:
        return []
    sweep = {c.variant: c.ttft_speedup for c in section.comparisons}
    notes = []
    for row in rows:
        quality = next((s for s in row["speedups"] if s.metric == "ttft"), None)
        single = sweep.get(row["variant"])
        if _side(quality) * _side(single) < 0:
            notes.append(
                f"{row['variant']}: TTFT speed-up {quality.ratio:.2f}x on the {row['task']} "
                f"quality pass (task prompts at the run's concurrency) but {single.ratio:.2f}x "
                f"in the speed sweep (synthetic prompts, one user): same statistic (ratio of "
                f"median TTFT), different workloads; neither CI covers host drift between "
                f"windows")
    return notes
