"""Speed of one (variant, task) from stored timings, and paired speed-ups vs baseline.

Every figure states its operating point: the engine's concurrency bound (from the
stored engine metadata) and whether the run was warm. Speed-ups pair the same
(item, repeat) under both variants and bootstrap whole items for the CI; latency
speed-ups are ratios of medians, the p50 figures the reports print beside them (the
headline's single-stream ratios are the same statistic, ``validate.speed.headline``).
"""

from __future__ import annotations

from collections.abc import Sequence

from validate.analysis.model import SpeedSummary, Speedup
from validate.engines.base import Timings
from validate.errors import StatsInputError
from validate.speed.types import AGGREGATE
from validate.stats.bootstrap import BootstrapSpec
from validate.stats.continuous import ratio_of_medians
from validate.stats.outcomes import PairedOutcomes
from validate.store import TimingRow

PREFIX_HIT_KEYS = ("prefix_hit_tokens", "cached_tokens", "prefix_hit")


def _concurrency(rows: Sequence[TimingRow]) -> int | None:
    found = {r.engine.get("concurrency") for r in rows if r.engine.get("concurrency") is not None}
    return int(max(found)) if found else None


def _timings(row: TimingRow) -> Timings:
    return Timings(started_at_s=row.started_at_s, e2e_s=row.e2e_s, ttft_s=row.ttft_s,
                   itl_s=row.itl_s, n_prompt_tokens=row.n_prompt_tokens,
                   n_output_tokens=row.n_output_tokens)


def speed_summary(rows: Sequence[TimingRow], warm: bool) -> SpeedSummary | None:
    """The stored rows' summary, computed by ``validate.speed`` (one definition of TTFT,
    TPOT and throughput for live engine results and stored ones)."""
    # Imported here: validate.speed imports this package's model, so a top-level import
    # would be circular.
    from validate.speed.metrics import speed_summary as summarise_timings

    timed = [r for r in rows if r.e2e_s is not None and r.started_at_s is not None]
    if not timed:
        return None
    return summarise_timings([_timings(r) for r in timed], _concurrency(timed), warm)


def prefix_hit_rate(rows: Sequence[TimingRow]) -> float | None:
    """Share of requests whose engine reported a prefix-cache hit (None when the
    engine does not report hits)."""
    flags = []
    for r in rows:
        for key in PREFIX_HIT_KEYS:
            if key in r.engine and r.engine[key] is not None:
                flags.append(bool(r.engine[key]))
                break
    return sum(flags) / len(flags) if flags else None


def _paired(base: Sequence[TimingRow], cand: Sequence[TimingRow], attr: str):
    by_key = {(r.item_id, r.repeat): getattr(r, attr) for r in base}
    a, b, ids = [], [], []
    for r in cand:
        va, vb = by_key.get((r.item_id, r.repeat)), getattr(r, attr)
        if va is not None and vb is not None:
            a.append(va)
            b.append(vb)
            ids.append(r.item_id)
    return a, b, ids


def speedups(base: Sequence[TimingRow], cand: Sequence[TimingRow],
             base_speed: SpeedSummary | None, cand_speed: SpeedSummary | None,
             bootstrap: BootstrapSpec, alpha: float) -> tuple[Speedup, ...]:
    """baseline/variant median latency (TTFT, TPOT, end-to-end) with paired bootstrap
    CIs, and variant/baseline aggregate throughput (no CI: one window per run)."""
    out = []
    for metric, attr in (("ttft", "ttft_s"), ("tpot", "tpot_s"), ("e2e", "e2e_s")):
        a, b, ids = _paired(base, cand, attr)
        if len(a) < 2:
            continue
        paired = PairedOutcomes.from_arrays(a, b, clusters=ids, task="speed", metric=metric)
        try:
            est = ratio_of_medians(paired, alpha, bootstrap, invert=True)
        except StatsInputError:
            continue
        out.append(Speedup(metric=metric, ratio=est.ratio, ci=tuple(est.ci_bootstrap),
                           n=paired.n_rows))
    if (base_speed and cand_speed and base_speed.output_tokens_per_s
            and cand_speed.output_tokens_per_s):
        out.append(Speedup(metric="throughput",
                           ratio=cand_speed.output_tokens_per_s / base_speed.output_tokens_per_s,
                           ci=None, n=cand_speed.n_requests, statistic=AGGREGATE))
    return tuple(out)
