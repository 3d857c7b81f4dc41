"""A ``SweepResult`` as a JSON record and back, for the results store.

The record keeps what was measured, not what was concluded: per level the concurrency,
the failures and every request's timings (index, send time, TTFT, inter-token gaps,
e2e, token counts). ``sweep_from_record`` recomputes each point with ``measure_point``
and the chosen level with ``choose``, so a stored sweep and a live one go through the
same definitions (floats round-trip through JSON exactly).
"""

from __future__ import annotations

from collections.abc import Mapping

from validate.engines.base import Timings
from validate.speed.errors import SpeedError
from validate.speed.sweep import SweepResult, choose, measure_point

RECORD_VERSION = 1


def timings_to_dict(index: int, t: Timings) -> dict:
    return {"index": index, "started_at_s": t.started_at_s, "e2e_s": t.e2e_s,
            "ttft_s": t.ttft_s, "itl_s": list(t.itl_s), "n_prompt_tokens": t.n_prompt_tokens,
            "n_output_tokens": t.n_output_tokens}


def timings_from_dict(r: Mapping) -> tuple[int, Timings]:
    """(index, Timings) of one stored request (``timings_to_dict``'s inverse)."""
    return int(r["index"]), Timings(
        started_at_s=r["started_at_s"], e2e_s=r["e2e_s"], ttft_s=r["ttft_s"],
        itl_s=tuple(r["itl_s"]), n_prompt_tokens=r["n_prompt_tokens"],
        n_output_tokens=r["n_output_tokens"])


def sweep_to_record(sweep: SweepResult, warm: bool = False) -> dict:
    return {"version": RECORD_VERSION,
            "target_tokens_per_s_per_user": sweep.target_tokens_per_s_per_user,
            "user_quantile": sweep.user_quantile, "warm": warm,
            "levels": [{"concurrency": p.concurrency, "n_failed": p.n_failed,
                        "requests": [timings_to_dict(i, t) for i, t in p.indexed]}
                       for p in sweep.points]}


def sweep_from_record(record: Mapping) -> SweepResult:
    """The ``SweepResult`` of a stored record (``SpeedError`` when it is malformed)."""
    try:
        if record["version"] != RECORD_VERSION:
            raise SpeedError(f"stored speed sweep: record version {record['version']!r}, "
                             f"this v41val reads {RECORD_VERSION}")
        target = float(record["target_tokens_per_s_per_user"])
        quantile = float(record["user_quantile"])
        points = []
        for level in record["levels"]:
            indexed = [timings_from_dict(r) for r in level["requests"]]
            points.append(measure_point(int(level["concurrency"]), indexed,
                                        int(level["n_failed"]), target, quantile,
                                        bool(record.get("warm", False))))
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, SpeedError):
            raise
        raise SpeedError(f"stored speed sweep is malformed: {type(exc).__name__}: {exc}") from None
    return SweepResult(target, quantile, tuple(points), choose(points))
