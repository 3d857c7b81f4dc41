"""The A/A noise floor beside every A/B pair: how often the baseline disagrees with
itself, and whether the candidate disagrees with it more often than that.

A flip means nothing if the same configuration flips as often against itself (vLLM
53257: greedy outputs that change with concurrency). With ``aa = true`` the plan runs
the baseline twice (``Plan.aa_variant``, the requests in another order at the same
concurrency); for each candidate and task, on the rows all three have: the A/A flip
rate (rows whose score differs between the two baseline runs), the A/B flip rate, the
teacher-forced KL of each against the baseline, and the one-sided test of A/B
discordance > A/A discordance (``validate.stats.subgroups.discordance_excess``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from validate.stats.jsonable import ToDict
from validate.stats.outcomes import ItemOutcomes
from validate.stats.subgroups import DiscordanceExcess, discordance_excess


@dataclass(frozen=True)
class NoiseFloor(ToDict):
    aa_variant: str
    n_rows: int
    aa_flip_rate: float
    ab_flip_rate: float
    aa_flips: int
    ab_flips: int
    aa_kl_mean: float | None
    ab_kl_mean: float | None
    excess: DiscordanceExcess | None


def _by_row(o: ItemOutcomes) -> dict[tuple[str, int], float]:
    return {(i, int(r)): float(v)
            for i, r, v in zip(o.item_ids, o.repeats, o.values, strict=True)}


def noise_floor(aa_variant: str, base: ItemOutcomes, aa: ItemOutcomes, cand: ItemOutcomes,
                aa_kl: float | None, ab_kl: float | None) -> NoiseFloor | None:
    """The noise floor of one (candidate, task); None when no row is in all three."""
    a, a2, b = _by_row(base), _by_row(aa), _by_row(cand)
    keys = sorted(set(a) & set(a2) & set(b))
    if not keys:
        return None
    x = np.array([a[k] != b[k] for k in keys])
    y = np.array([a[k] != a2[k] for k in keys])
    _, clusters = np.unique([k[0] for k in keys], return_inverse=True)
    return NoiseFloor(aa_variant=aa_variant, n_rows=len(keys),
                      aa_flip_rate=float(y.mean()), ab_flip_rate=float(x.mean()),
                      aa_flips=int(y.sum()), ab_flips=int(x.sum()),
                      aa_kl_mean=aa_kl, ab_kl_mean=ab_kl,
                      excess=discordance_excess(x, y, clusters))
