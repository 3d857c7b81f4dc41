"""What the demo run shows, in one sentence per optimization, from its measured numbers.

A table of deltas, bounds and ratios does not tell a first-time reader what to conclude:
that a delta of +0.0 with a lower bound of -68 points is "too few items", not "no
cost"; that a KL of 1e-7 is tiny (on the scale ``v41val calibrate`` plants: Gaussian
logit noise of standard deviation sigma moves a distribution by KL ~ sigma^2 / 2 nats
per token, less for a peaked one); or that a bounded-replay variant that is slower in
warm mode is paying a known cost (it recomputes the window that exact mode reads from
the prefix cache, which is what keeps the cache small), not showing a bug.

Everything here reads the report document (``reports.document``), so each sentence is
made of the numbers the report itself shows. ``tests/validate/test_demo_conclusions.py``
rebuilds each clause from a document's numbers.
"""

from __future__ import annotations

import math
import statistics

SAME_SPEED = 0.05  # a TTFT ratio within 5 % of 1 is read as no change (not "1.00x faster")
WARM_REPLAY_COST = ("in warm mode bounded replay recomputes the window that exact mode "
                    "reads from the prefix cache: the cost it pays to keep the prefix cache small")


def noise_equivalent(kl: float) -> float:
    """The logit-noise standard deviation sigma whose KL, sigma^2 / 2 to second order
    for i.i.d. Gaussian noise on a spread-out distribution, equals ``kl``: the scale of
    ``v41val calibrate``'s planted noise. A peaked distribution needs more noise for the
    same KL, so the real equivalent is at least this."""
    return math.sqrt(2.0 * max(kl, 0.0))


def kl_phrase(kl: float | None, top1: float | None) -> str:
    """The fidelity clause: KL with its scale, and top-1 agreement."""
    if kl is None:
        return "no fidelity measured"
    agree = "" if top1 is None else f", top-1 agreement {100 * top1:.1f} %"
    if kl <= 0.0:
        return f"teacher-forced KL 0 (the baseline's distributions exactly){agree}"
    return (f"teacher-forced KL {kl:.1e} nats/token, about what Gaussian logit noise of "
            f"std {noise_equivalent(kl):.1g} does (the noise v41val calibrate plants; "
            f"KL ~ std^2/2){agree}")


def _pts(x: float) -> str:
    return f"{100 * x:+.1f} pts"


def _comparisons(doc: dict, variant: str) -> list[tuple[dict, dict]]:
    """(task, comparison) of ``variant`` over the document's tasks."""
    return [(t, c) for t in doc["tasks"] for c in t["comparisons"] if c["variant"] == variant]


def _options(doc: dict, variant: str) -> dict:
    for v in doc.get("variants") or ():
        if v["variant"] == variant:
            return dict((v.get("config") or {}).get("options") or {})
    return {}


def accuracy_phrase(doc: dict, variant: str) -> str:
    """The accuracy clause: what the gate decided and why, from flips, deltas, bounds."""
    rows = _comparisons(doc, variant)
    invalid = [c for _, c in rows if c["status"] == "INVALID"]
    if invalid:
        reasons = invalid[0]["health_failures"] or (invalid[0]["verdict"] or {}).get("reasons")
        return "the run is broken for it (" + "; ".join(reasons or ["no paired outcomes"]) + ")"
    usable = [(t, c) for t, c in rows if not t.get("floor") and c["table"] is not None]
    floor = [t["task"] for t, _ in rows if t.get("floor")]
    at_floor = (f" ({', '.join(floor)}: the baseline is at the floor, where accuracy "
                f"cannot show a cost)" if floor else "")
    if not usable:
        return "accuracy cannot show a cost: the baseline is at the floor of every task"
    b = sum(c["table"]["b"] for _, c in usable)
    cc = sum(c["table"]["c"] for _, c in usable)
    n = sum(c["table"]["n"] for _, c in usable)
    changed = (f"{b + cc} of {n} answers changed ({b} right to wrong, {cc} wrong to right, "
               f"delta {_pts((cc - b) / n)}){at_floor}")
    verdicts = [(t, c, c["verdict"]) for t, c in usable if c["verdict"]]
    if not verdicts:
        return changed
    worst_t, _, worst = min(verdicts, key=lambda x: x[2]["lower_bound"])
    bound = (f"the gate's lower bound on {worst_t['task']} is {_pts(worst['lower_bound'])} "
             f"against a margin of {_pts(-worst['margin'])}")
    failed = [(t, c) for t, c, v in verdicts if v["verdict"] == "FAIL"]
    if failed:
        t, c = failed[0]
        return (f"it costs accuracy: {t['task']} {_pts(c['delta'])} "
                f"({c['table']['b']} right to wrong), worse than the margin; {changed}")
    undecided = [v for _, _, v in verdicts if v["verdict"] == "INCONCLUSIVE"]
    if undecided:
        need = max(v["n_to_decide"] or 0 for v in undecided)
        more = f"; about {need} items per task would decide" if need else ""
        return f"too few items to decide: {changed}, but {bound}{more}"
    if any(v["verdict"] == "WARN" for _, _, v in verdicts):
        return f"a significant accuracy cost, but within the margin: {changed}; {bound}"
    return f"no accuracy cost beyond the margin: {changed}; {bound}"


def fidelity_values(doc: dict, variant: str) -> tuple[float | None, float | None]:
    """(largest KL mean, smallest top-1 agreement) over the tasks: the worst task."""
    found = [v["fidelity"] for t in doc["tasks"] for v in t["variants"]
             if v["variant"] == variant and v.get("fidelity") and v["fidelity"]["kl_mean"] is not None]
    if not found:
        return None, None
    tops = [f["top1_agreement"] for f in found if f["top1_agreement"] is not None]
    return max(f["kl_mean"] for f in found), (min(tops) if tops else None)


def ttft_ratio(doc: dict, variant: str) -> float | None:
    """Median over tasks of the TTFT speed-up vs the baseline (> 1 = faster)."""
    ratios = [c["speedups"]["ttft"]["ratio"] for _, c in _comparisons(doc, variant)
              if (c.get("speedups") or {}).get("ttft", {}).get("ratio") is not None]
    return statistics.median(ratios) if ratios else None


def speed_phrase(doc: dict, variant: str) -> str:
    """The quality pass's TTFT ratio (warm prompts, one window per variant, so labelled),
    then the interleaved rounds' ratio with its interval over rounds when the run has
    them (``interleaved_phrase``)."""
    ratio = ttft_ratio(doc, variant)
    rounds = interleaved_phrase(doc, variant)
    if ratio is None:
        return rounds or "no speed measured"
    if abs(ratio - 1.0) < SAME_SPEED:
        text = f"time to first token as the baseline's ({ratio:.2f}x)"
    elif ratio >= 1.0:
        text = f"time to first token {ratio:.2f}x faster than the baseline"
    else:
        text = f"time to first token {1 / ratio:.2f}x slower than the baseline"
    bounded = _options(doc, variant).get("swa") == "bounded"
    if ratio < 1.0 and bounded and (doc.get("run") or {}).get("warm"):
        text += f", as expected: {WARM_REPLAY_COST}"
    if rounds:
        text = f"{text} (quality pass, one window per variant); {rounds}"
    return text


def interleaved_phrase(doc: dict, variant: str) -> str | None:
    """TTFT and TPOT speed-ups of the interleaved rounds (cold synthetic prompts,
    baseline / variant, > 1 faster) with their intervals over rounds, and what the
    intervals say; None without rounds for this variant."""
    found = [x for x in doc.get("interleaved") or () if x.get("variant") == variant]
    ups = found[0].get("speedups") or {} if found else {}
    parts = []
    for metric, label in (("ttft", "TTFT"), ("tpot", "TPOT")):
        up = ups.get(metric)
        if not up or up.get("ratio") is None or not up.get("ci"):
            continue
        lo, hi = up["ci"]
        reading = "faster" if lo > 1.0 else "slower" if hi < 1.0 else "no change resolved"
        parts.append(f"{label} {up['ratio']:.2f}x [{lo:.2f}, {hi:.2f}], {reading}")
    if not parts:
        return None
    return (f"in {found[0]['rounds']} interleaved rounds on cold prompts (95 % interval "
            f"over rounds): " + "; ".join(parts))


def optimization_sentences(doc: dict) -> list[str]:
    """One sentence per candidate variant (optimization) of the document, in the demo
    plan's order when the document has one."""
    out = []
    decisions = doc.get("variant_decisions") or {}
    candidates = [v["variant"] for v in doc.get("variants") or () if not v["is_baseline"]]
    planned = (doc.get("demo") or {}).get("variants") or candidates  # the plan's order
    for name in [v for v in planned if v in candidates]:
        kl, top1 = fidelity_values(doc, name)
        decision = decisions.get(name, "UNGATED")
        out.append(f"{name} ({decision}): {accuracy_phrase(doc, name)}; "
                   f"{kl_phrase(kl, top1)}; {speed_phrase(doc, name)}.")
    return out
