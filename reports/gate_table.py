"""The "what the gate decided on" table: one row per gated claim (task x optimization)
with the bounds, levels and margin the verdict follows from, as plain strings.

Why a table of its own: the gate decides on one-sided score bounds at family-adjusted
levels (Holm by default), not on the two-sided 95 % interval a reader expects beside a
delta. Showing those bounds, their levels and the margin side by side lets anyone check
the verdict by eye with the rule printed under the table (``RULE``), and lets a test
recompute every verdict from the rendered text alone. Terminal, Markdown, HTML and
JUnit print these cells; the numbers are the report document's (``verdict`` of each
comparison), never recomputed here.
"""

from __future__ import annotations

from reports import fmt

COLUMNS = ("claim", "Δ", "lower bound (α)", "upper bound (α)", "-margin", "p worse",
           "verdict", "n to decide")
RULE = ("PASS: lower bound > -margin (WARN: a PASS whose one-sided p worse ≤ alpha); "
        "FAIL: upper bound < -margin; else INCONCLUSIVE, with the n that would decide at "
        "the observed Δ and discordance. Bounds in points, one-sided, each at the "
        "family-adjusted α printed beside it; p worse: one-sided score p of "
        "'candidate worse than baseline', unadjusted.")
EQUIVALENCE_RULE = ("Equivalence (TOST): PASS also needs upper bound < +margin (both at the "
                    "PASS claim's α); FAIL when either one-sided FAIL test rejects.")


def alpha_text(a) -> str:
    """A one-sided level as printed: 0.0125 -> '0.0125', 0.05/3 -> '0.0167'."""
    return fmt.DASH if fmt.missing(a) else f"{a:.3g}"


def bound_text(x, a) -> str:
    if fmt.missing(x):
        return fmt.DASH
    return f"{fmt.pts(x, signed=True)} (α {alpha_text(a)})"


def n_to_decide_text(v: dict | None) -> str:
    """The n that would decide an INCONCLUSIVE claim; a dash for decided ones."""
    if not v or v["verdict"] != "INCONCLUSIVE":
        return fmt.DASH
    n = v.get("n_to_decide")
    return "none (Δ on the margin)" if n is None else str(n)


def title(doc: dict) -> str:
    p = doc.get("policy") or {}
    return (f"What the gate decided on ({p.get('correction', '?')} over "
            f"{p.get('family_size', '?')} claims, alpha {p.get('alpha', '?')} one-sided)")


def rule(doc: dict) -> str:
    p = doc.get("policy") or {}
    return RULE + (" " + EQUIVALENCE_RULE if p.get("equivalence") else "")


def gate_rows(doc: dict) -> list[dict]:
    """One dict per gated comparison (column -> text, plus 'status'), in task order."""
    out = []
    for task in doc["tasks"]:
        for c in task["comparisons"]:
            v = c.get("verdict")
            if v is None:
                continue
            out.append({
                "claim": f"{task['task']} · {c['variant']}",
                "Δ": fmt.pts(v.get("delta"), signed=True),
                "lower bound (α)": bound_text(v.get("lower_bound"), v.get("bound_alpha")),
                "upper bound (α)": bound_text(v.get("upper_bound"), v.get("upper_bound_alpha")),
                "-margin": f"-{fmt.margin_points(v['margin'])}",
                "p worse": fmt.pvalue(v.get("p_worse")),
                "verdict": v["verdict"], "n to decide": n_to_decide_text(v),
                "status": v["verdict"],
            })
    return out


def decided_on(c: dict) -> str:
    """'lower bound -0.97 (α 0.0125) > -1.0': the comparison the verdict rests on, in words
    (the what-changed lines and JUnit messages)."""
    v = c.get("verdict")
    if not v or fmt.missing(v.get("lower_bound")):
        return ""
    m = f"-{fmt.margin_points(v['margin'])}"
    lower = f"lower bound {bound_text(v['lower_bound'], v.get('bound_alpha'))}"
    upper = f"upper bound {bound_text(v['upper_bound'], v.get('upper_bound_alpha'))}"
    word = v["verdict"]
    if v.get("equivalence"):
        return f"{lower}, {upper}, margin ±{fmt.margin_points(v['margin'])} (TOST)"
    if word in ("PASS", "WARN"):
        return f"{lower} > {m}"
    if word == "FAIL":
        return f"{upper} < {m}"
    return f"{lower} ≤ {m} ≤ {upper}"
