"""The over-HTTP approximation of KL(P || Q) from top-k logprobs (a lower bound).

An OpenAI-compatible server returns, at each teacher-forced position, the forced
token's logprob and the top-k alternatives -- not the full distribution. The
approximation keeps as separate outcomes the tokens whose probability is known under
*both* models (the forced token, and tokens in both top-k lists) and lumps every other
token into one tail outcome whose mass is 1 minus the known mass on each side:

    KL_k = sum_{c in C} P(c) log(P(c)/Q(c)) + P_tail log(P_tail / Q_tail)

This is KL between coarse-grained versions of P and Q; by the data-processing (log-sum)
inequality it never exceeds the exact KL, and it equals it when the kept tokens carry
all the mass. So an over-HTTP KL is a floor: a variant can be worse than it shows,
never better. Masses are floored at ``1e-12`` so a tail that rounds to zero on one side
gives a large but finite term.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from validate.fidelity.errors import FidelityError

FLOOR = 1e-12


def coarse_kl(base_known: Mapping[str, float], variant_known: Mapping[str, float]) -> float:
    """KL_k from each side's known logprobs (token -> logprob)."""
    cells = [t for t in base_known if t in variant_known]
    if not cells:
        raise FidelityError("top-k KL: no token is known under both models")
    p = [math.exp(base_known[t]) for t in cells]
    q = [math.exp(variant_known[t]) for t in cells]
    p.append(max(FLOOR, 1.0 - sum(p)))
    q.append(max(FLOOR, 1.0 - sum(q)))
    return max(0.0, sum(pi * math.log(max(pi, FLOOR) / max(qi, FLOOR)) for pi, qi in zip(p, q, strict=True)))


def known_logprobs(token: str, logprob: float | None, top: Sequence[tuple[str, float]]) -> dict:
    """The forced token's logprob plus the top-k alternatives (token -> logprob)."""
    known = {t: float(v) for t, v in top}
    if logprob is not None:
        known[token] = float(logprob)
    return known


def top1_of(top: Sequence[tuple[str, float]]) -> str | None:
    """The most likely alternative (first one on ties, as the server listed them)."""
    best = None
    for t, v in top:
        if best is None or v > best[1]:
            best = (t, v)
    return None if best is None else best[0]
