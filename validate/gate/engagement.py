"""The gate's engagement check: an optimization that did not run cannot PASS.

A candidate that never replayed (prefix caching off, a cold run, vLLM's replay switched
off by a log line) answers exactly like the baseline, so its paired delta is 0 and the
non-inferiority test PASSes it: a verdict about nothing. With ``[engagement]
min_fraction`` in the policy, each optimization a candidate is expected to exercise
must have engaged on at least that share of the candidate's items on the task, else the
cell is INVALID with "did not engage" and the counts.

Items whose ledger is unknown (an engine that reports nothing) are not evidence of
engagement: they count in the denominator and the reason says how many were unknown,
so "unknown" can never pass for "engaged". The counts come from
``validate.analysis.engagement`` (which reads the store); this module only judges them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngagementPolicy:
    """``min_fraction``: the least share of items on which every expected optimization
    must have engaged (None: not checked; the report still shows the counts)."""

    min_fraction: float | None = None


@dataclass(frozen=True)
class EngagementCount:
    """One expected optimization of one (variant, task): on how many of ``n`` items it
    engaged, and on how many the ledger could tell at all (``known``)."""

    optimization: str
    engaged: int
    known: int
    n: int

    @property
    def fraction(self) -> float:
        return self.engaged / self.n if self.n else 0.0

    @property
    def unknown(self) -> int:
        return self.n - self.known

    def to_dict(self) -> dict:
        return {"optimization": self.optimization, "engaged": self.engaged,
                "known": self.known, "n": self.n, "fraction": self.fraction}


def engagement_failures(counts: tuple[EngagementCount, ...],
                        policy: EngagementPolicy) -> tuple[str, ...]:
    """One "did not engage" reason per expected optimization below the policy's share."""
    if policy.min_fraction is None:
        return ()
    out = []
    for c in counts:
        if c.n and c.fraction >= policy.min_fraction:
            continue
        out.append(f"did not engage: {c.optimization} engaged on {c.engaged} of {c.n} items "
                   f"({c.known} known, {c.unknown} unknown) = {100 * c.fraction:.1f} % < "
                   f"{100 * policy.min_fraction:.1f} % (policy engagement.min_fraction)")
    return tuple(out)
