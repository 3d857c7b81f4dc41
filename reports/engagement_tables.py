"""The "did it engage, and is it above the noise?" tables, as plain strings: per
(task, candidate) the expected optimizations' engagement counts, the paired delta broken
down by engagement and by prompt-length bucket, the A/A noise floor beside the A/B
pair, and the interleaved speed rounds' speed-ups. Terminal, Markdown and HTML print these cells; the numbers are the report
document's (``engagement`` and ``noise_floor`` of each comparison, ``interleaved``),
never recomputed.
"""

from __future__ import annotations

from reports import fmt

ENGAGEMENT_TITLE = "Did the optimization engage? (engagement ledger, per candidate's paired rows)"
ENGAGEMENT_COLUMNS = ("task", "candidate", "optimization", "engaged", "known", "share")
BREAKDOWN_TITLE = ("Paired Δ by engagement and prompt length (descriptive: no family "
                   "correction, 95 % interval per group)")
BREAKDOWN_COLUMNS = ("task", "candidate", "by", "group", "n", "Δ pts", "interval",
                     "b / c")
NOISE_TITLE = "A/A noise floor (the baseline run twice) beside each A/B pair"
NOISE_COLUMNS = ("task", "candidate", "A/A flips", "A/B flips", "A/A KL", "A/B KL",
                 "p(A/B > A/A)")
NOISE_LEGEND = ("flips: rows whose score differs from the baseline's; p: one-sided test "
                "that the candidate disagrees with the baseline more often than the "
                "baseline with itself, on the rows all three runs have.")


def _comparisons(doc: dict):
    for t in doc["tasks"]:
        for c in t["comparisons"]:
            yield t["task"], c


def engagement_rows(doc: dict) -> list[dict]:
    out = []
    for task, c in _comparisons(doc):
        e = c.get("engagement") or {}
        for k in e.get("counts") or ():
            out.append({"task": task, "candidate": c["variant"],
                        "optimization": k["optimization"],
                        "engaged": f"{k['engaged']} of {k['n']}",
                        "known": str(k["known"]), "share": fmt.fraction(k["fraction"])})
    return out


def breakdown_rows(doc: dict) -> list[dict]:
    out = []
    for task, c in _comparisons(doc):
        for b in (c.get("engagement") or {}).get("breakdown") or ():
            out.append({"task": task, "candidate": c["variant"], "by": b["by"],
                        "group": b["group"], "n": str(b["n_rows"]),
                        "Δ pts": fmt.pts(b["delta"], signed=True),
                        "interval": fmt.interval_pts(b["ci"]),
                        "b / c": f"{b['a_only']} / {b['b_only']}"})
    return out


def _flips(k: int, rate) -> str:
    return f"{k} ({fmt.fraction(rate)})"


def noise_rows(doc: dict) -> list[dict]:
    out = []
    for task, c in _comparisons(doc):
        n = c.get("noise_floor")
        if not n:
            continue
        excess = n.get("excess") or {}
        out.append({"task": task, "candidate": c["variant"],
                    "A/A flips": _flips(n["aa_flips"], n["aa_flip_rate"]),
                    "A/B flips": _flips(n["ab_flips"], n["ab_flip_rate"]),
                    "A/A KL": fmt.kl(n.get("aa_kl_mean")),
                    "A/B KL": fmt.kl(n.get("ab_kl_mean")),
                    "p(A/B > A/A)": fmt.pvalue(excess.get("p"))})
    return out


INTERLEAVED_COLUMNS = ("candidate", "rounds", "concurrency", "TTFT speed-up", "TPOT speed-up",
                       "e2e speed-up")
INTERLEAVED_TITLE = ("Interleaved speed rounds (order alternating per round; 95 % interval "
                     "over rounds, so host drift between variants widens it instead of "
                     "biasing it)")


def interleaved_rows(doc: dict) -> list[dict]:
    out = []
    for x in doc.get("interleaved") or ():
        ups = x["speedups"]
        out.append({"candidate": x["variant"], "rounds": str(x["rounds"]),
                    "concurrency": str(x["concurrency"]),
                    **{f"{label} speed-up": fmt.ratio(ups.get(m))
                       for m, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "e2e"))}})
    return out


def tables(doc: dict) -> list[tuple[str, tuple[str, ...], list[dict], str]]:
    """(title, columns, rows, legend) of each table that has rows."""
    found = [(ENGAGEMENT_TITLE, ENGAGEMENT_COLUMNS, engagement_rows(doc), ""),
             (BREAKDOWN_TITLE, BREAKDOWN_COLUMNS, breakdown_rows(doc), ""),
             (NOISE_TITLE, NOISE_COLUMNS, noise_rows(doc), NOISE_LEGEND),
             (INTERLEAVED_TITLE, INTERLEAVED_COLUMNS, interleaved_rows(doc), "")]
    return [t for t in found if t[2]]
