"""The interleaved speed rounds of a stored run, as speed-ups of every variant vs the
baseline (``validate.speed.interleaved``): the figures host drift between variants
cannot fake, beside the headline sweep's."""

from __future__ import annotations

from dataclasses import dataclass

from validate.speed.errors import SpeedError
from validate.speed.interleaved import METRICS, interleaved_speedup, rounds_from_record
from validate.speed.types import Speedup
from validate.stats.bootstrap import BootstrapSpec
from validate.stats.jsonable import ToDict
from validate.store import ResultsStore


@dataclass(frozen=True)
class InterleavedSpeed(ToDict):
    """Speed-ups of ``variant`` vs the baseline over ``rounds`` alternating rounds at
    ``concurrency`` (``n`` of each Speedup: rounds, the bootstrap's clusters)."""

    variant: str
    rounds: int
    concurrency: int
    speedups: tuple[Speedup, ...]


def interleaved_section(store: ResultsStore, plan_hash: str, baseline: str,
                        variants: tuple[str, ...], alpha: float,
                        bootstrap: BootstrapSpec) -> tuple[InterleavedSpeed, ...]:
    found = store.rounds(plan_hash)
    if found is None:
        return ()
    settings, record = found
    measured = rounds_from_record(record)
    out = []
    for v in variants:
        if v == baseline:
            continue
        ups = []
        for metric in METRICS:
            try:
                r = interleaved_speedup(measured, baseline, v, metric, alpha, bootstrap)
            except SpeedError:
                continue
            ups.append(Speedup(metric=metric.removesuffix("_s"), ratio=r.ratio,
                               ci=r.ci_bootstrap, n=r.n_items, statistic="means"))
        out.append(InterleavedSpeed(v, int(settings["rounds"]), int(settings["concurrency"]),
                                    tuple(ups)))
    return tuple(out)
