"""What a report shows is what the gate decided on: in every format, per claim, the
bounds, their levels and the margin, from which a reader recomputes the shown verdict.

Independent recomputes (nothing from validate.stats or validate.gate):
- Tango's score statistic with the constrained MLE found by numerical maximisation of
  the multinomial likelihood (scipy), bounds by root finding (brentq);
- Holm with statsmodels; each bound's level is alpha * p / p_adj;
- with no discordant item the lower bound has a closed form: Z(theta) =
  sqrt(n |theta| / (1 - |theta|)), so Z = z gives theta = -z^2 / (n + z^2);
- the verdict from the shown numbers alone: PASS when the lower bound is above
  -margin (WARN when p worse <= alpha too), FAIL when the upper bound is below it,
  else INCONCLUSIVE.
The zero-flip runs are the case issue 17 found: the normal interval collapses to
[0, 0] while the gate decides on a bound several points below zero.
"""

from __future__ import annotations

import html
import json
import math
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from builders import TABLES, make_analysis
from scipy import optimize, special, stats
from statsmodels.stats.multitest import multipletests
from store_fixture import PlanSpec, add_plan, outcomes_with

from reports.document import report_document
from reports.html import render_html
from reports.json_report import render_json, validate_document
from reports.junit import render_junit
from reports.markdown import render_markdown
from reports.terminal import terminal_text
from validate.analysis.build import analyze_run
from validate.stats import BootstrapSpec
from validate.store import ResultsStore

NUM = r"[+-]?\d+\.\d+"


def tango_z(b: int, c: int, n: int, theta: float, shift: float = 0.0) -> float:
    """Score statistic of H0 p_c - p_b = theta, the nuisance p_b fitted numerically;
    ``shift`` is added to c - b (the FAIL claim's continuity correction is +0.5)."""
    lo, hi = max(0.0, -theta), (1.0 - theta) / 2.0

    def nll(q):
        return -(special.xlogy(b, q) + special.xlogy(c, q + theta)
                 + special.xlogy(n - b - c, 1.0 - 2.0 * q - theta))

    q = optimize.minimize_scalar(nll, bounds=(lo, hi), method="bounded",
                                 options={"xatol": 1e-13}).x
    var = n * (2.0 * q + theta * (1.0 - theta))
    return (c - b - n * theta + shift) / math.sqrt(var)


def tango_lower(b, c, n, alpha):
    z = stats.norm.ppf(1 - alpha)
    est = (c - b) / n
    return optimize.brentq(lambda t: tango_z(b, c, n, t) - z, -1 + 1e-9, est - 1e-9, xtol=1e-12)


def edge_p(b, c, n, margin):
    """The PASS claim's exact test at the never-better edge (validate.stats.score_interval):
    P(Binomial(n, margin) <= b - c), by scipy."""
    return float(stats.binom.cdf(b - c, n, margin)) if b >= c else 0.0


def pass_lower(b, c, n, alpha):
    """The PASS claim's lower bound: the smaller of the score bound and the edge test's,
    a Clopper-Pearson bound on the signed count c - b (scipy's beta quantiles)."""
    k = b - c
    if k >= 0:
        edge = -1.0 if k >= n else -float(stats.beta.ppf(1 - alpha, k + 1, n - k))
    else:
        edge = float(stats.beta.ppf(alpha, -k, n + k + 1))
    return min(tango_lower(b, c, n, alpha), edge)


def tango_upper(b, c, n, alpha, shift=0.5):
    """The FAIL claim's upper bound: the continuity-corrected statistic inverted."""
    z = stats.norm.ppf(1 - alpha)
    est = (c - b) / n
    return optimize.brentq(lambda t: tango_z(b, c, n, t, shift) + z, est + 1e-9, 1 - 1e-9,
                           xtol=1e-12)


def verdict_from_shown(lower: float, upper: float, neg_margin: float, p_worse: float,
                       alpha: float) -> str:
    if lower > neg_margin:
        return "WARN" if p_worse <= alpha else "PASS"
    if upper < neg_margin:
        return "FAIL"
    return "INCONCLUSIVE"


def _claims(doc):
    return [(t["task"], c) for t in doc["tasks"] for c in t["comparisons"] if c.get("verdict")]


ZERO_FLIPS = {("gsm8k", "bounded"): (100, 70, 0, 0),
              ("gpqa_diamond_cot_zeroshot", "bounded"): (198, 60, 0, 0)}
ZERO_MARGINS = {"gsm8k": 0.02, "gpqa_diamond_cot_zeroshot": 0.05}


@pytest.fixture(scope="module", params=["mixed", "zero-flips"])
def shown(request):
    if request.param == "mixed":
        return json.loads(render_json(report_document(make_analysis()))), TABLES
    analysis = make_analysis(ZERO_FLIPS, ZERO_MARGINS)
    return json.loads(render_json(report_document(analysis))), ZERO_FLIPS


# --- the JSON document ---------------------------------------------------------------

def test_json_interval_is_the_gates_bounds_at_the_holm_levels(shown):
    doc, tables = shown
    validate_document(doc)
    claims = _claims(doc)
    alpha = doc["policy"]["alpha"]
    p_pass, p_fail = [], []
    for task, c in claims:
        n, _, b, cc = tables[(task, c["variant"])]
        z = tango_z(b, cc, n, -c["verdict"]["margin"])
        p_pass.append(max(stats.norm.sf(z), edge_p(b, cc, n, c["verdict"]["margin"])))
        p_fail.append(stats.norm.cdf(tango_z(b, cc, n, -c["verdict"]["margin"], 0.5)))
    adj_pass = multipletests(p_pass, alpha=alpha, method="holm")[1]
    adj_fail = multipletests(p_fail, alpha=alpha, method="holm")[1]
    for i, (task, c) in enumerate(claims):
        n, _, b, cc = tables[(task, c["variant"])]
        v, interval = c["verdict"], c["interval"]
        assert interval["kind"] == "gate"
        assert interval["low_alpha"] == pytest.approx(alpha * p_pass[i] / adj_pass[i], rel=1e-6)
        assert interval["high_alpha"] == pytest.approx(alpha * p_fail[i] / adj_fail[i], rel=1e-6)
        assert interval["low"] == pytest.approx(pass_lower(b, cc, n, interval["low_alpha"]),
                                                abs=1e-7)
        assert interval["high"] == pytest.approx(tango_upper(b, cc, n, interval["high_alpha"]),
                                                 abs=1e-7)
        assert (interval["low"], interval["high"]) == (v["lower_bound"], v["upper_bound"])
        p_worse = stats.norm.cdf(tango_z(b, cc, n, 0.0)) if b + cc else 0.5
        assert verdict_from_shown(interval["low"], interval["high"], -v["margin"], p_worse,
                                  alpha) == c["status"] == v["verdict"]
        if c["status"] == "INCONCLUSIVE":
            assert isinstance(v["n_to_decide"], int) and v["n_to_decide"] > n


def test_zero_flips_show_the_gates_bound_not_a_collapsed_interval():
    doc = json.loads(render_json(report_document(make_analysis(ZERO_FLIPS, ZERO_MARGINS))))
    for task, c in _claims(doc):
        n = ZERO_FLIPS[(task, c["variant"])][0]
        assert c["ci_wald"] == [0.0, 0.0]  # the figure issue 17 found in the Delta column
        low_alpha = c["interval"]["low_alpha"]
        z = stats.norm.ppf(1 - low_alpha)
        # the score bound's closed form at b = c = 0, or the exact edge test's (no
        # discordant item in n has probability (1 + theta)^n at the edge) where lower
        expected = min(-z * z / (n + z * z), -(1 - low_alpha ** (1 / n)))
        assert c["interval"]["low"] == pytest.approx(expected, abs=1e-9)
        assert c["interval"]["low"] < -0.018  # several points wide at these n
    status = {task: c["status"] for task, c in _claims(doc)}
    # gsm8k: n = 100 cannot clear a 2-point margin (bound about -3.7); GPQA's 5 points can
    assert status == {"gsm8k": "INCONCLUSIVE", "gpqa_diamond_cot_zeroshot": "PASS"}


# --- the rendered text ---------------------------------------------------------------

def _gate_cells_markdown(md: str) -> list[list[str]]:
    section = md.split("### What the gate decided on", 1)[1].split("\n\n", 2)[1]
    lines = [r for r in section.splitlines() if r.startswith("| ")][1:]  # drop the header
    return [[x.strip().strip("*") for x in r.strip("|").split(" | ")] for r in lines]


def _gate_cells_terminal(text: str) -> list[list[str]]:
    section = text.split("What the gate decided on (", 1)[1].split("└", 1)[0]
    rows = [r for r in section.splitlines() if r.startswith("│")]
    return [[x.strip() for x in r.strip("│").split("│")] for r in rows]


def _gate_cells_html(page: str) -> list[list[str]]:
    section = page.split("What the gate decided on", 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", section.split("<tbody>", 1)[1])
    return [[html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
             for cell in re.findall(r"<td[^>]*>(.*?)</td>", r)] for r in rows]


RENDERERS = {
    "markdown": lambda d: _gate_cells_markdown(render_markdown(d)),
    "terminal": lambda d: _gate_cells_terminal(terminal_text(d, width=200)),
    "html": lambda d: _gate_cells_html(render_html(d, fig_format=None)),
}


def _bound(cell: str) -> tuple[float, float]:
    m = re.fullmatch(rf"({NUM}) \(α ([\d.e-]+)\)", cell)
    assert m, cell
    return float(m.group(1)), float(m.group(2))


@pytest.mark.parametrize("fmt", sorted(RENDERERS))
def test_verdict_recomputed_from_the_shown_text(shown, fmt):
    doc, tables = shown
    rows = RENDERERS[fmt](doc)
    claims = _claims(doc)
    assert len(rows) == len(claims)
    alpha = doc["policy"]["alpha"]
    for cells, (task, c) in zip(rows, claims, strict=True):
        claim, delta, lower, upper, neg_margin, p_worse, verdict, n_decide = cells
        assert claim == f"{task} · {c['variant']}"
        n, _, b, cc = tables[(task, c["variant"])]
        (lo, lo_alpha), (hi, hi_alpha) = _bound(lower), _bound(upper)
        # the shown numbers are the gate's, to the printed precision
        assert lo == pytest.approx(100 * pass_lower(b, cc, n, lo_alpha), abs=0.01)
        assert hi == pytest.approx(100 * tango_upper(b, cc, n, hi_alpha), abs=0.01)
        assert float(delta) == pytest.approx(100 * (cc - b) / n, abs=0.005)
        assert float(neg_margin) == pytest.approx(-100 * c["verdict"]["margin"])
        p = float(p_worse.replace("<", ""))
        assert abs(lo - float(neg_margin)) > 0.005 and abs(hi - float(neg_margin)) > 0.005
        assert verdict_from_shown(lo, hi, float(neg_margin), p, alpha) == verdict
        assert verdict == c["status"]
        if verdict == "INCONCLUSIVE":
            assert int(n_decide) == c["verdict"]["n_to_decide"]
        else:
            assert n_decide == "–"


def test_junit_messages_carry_the_bound_the_verdict_rests_on(shown):
    doc, tables = shown
    root = ET.fromstring(render_junit(doc).split("?>", 1)[1])
    by_case = {(c.get("classname").removeprefix("v41val."), c.get("name")): c
               for c in root.iter("testcase")}
    for task, c in _claims(doc):
        out = by_case[(task, c["variant"])].findtext("system-out")
        line = next(x for x in out.splitlines() if x.startswith("gate: "))
        n, _, b, cc = tables[(task, c["variant"])]
        if c["status"] == "FAIL":
            m = re.fullmatch(rf"gate: upper bound ({NUM}) \(α ([\d.e-]+)\) < (-\d+\.\d)", line)
            assert m and float(m.group(1)) < float(m.group(3))
        elif c["status"] in ("PASS", "WARN"):
            m = re.fullmatch(rf"gate: lower bound ({NUM}) \(α ([\d.e-]+)\) > (-\d+\.\d)", line)
            assert m and float(m.group(1)) > float(m.group(3))
        else:
            m = re.fullmatch(rf"gate: lower bound ({NUM}) \(α ([\d.e-]+)\) ≤ (-\d+\.\d) ≤ "
                             rf"upper bound ({NUM}) \(α ([\d.e-]+)\)", line)
            assert m and float(m.group(1)) <= float(m.group(3)) <= float(m.group(4))
            skipped = by_case[(task, c["variant"])].find("skipped")
            assert f"about {c['verdict']['n_to_decide']} items would decide" in skipped.get(
                "message")
        assert float(m.group(1)) == pytest.approx(
            100 * (tango_upper if c["status"] == "FAIL" else pass_lower)(
                b, cc, n, float(m.group(2))), abs=0.01)


def test_task_tables_delta_cell_shows_the_gate_interval(shown):
    doc, _ = shown
    md = render_markdown(doc)
    for task, c in _claims(doc):
        i = c["interval"]
        cell = (f"{100 * c['delta']:+.2f} [{100 * i['low']:+.2f}, {100 * i['high']:+.2f}]")
        row = next(r for r in md.split(f"### {task}", 1)[1].splitlines()
                   if r.startswith(f"| {c['variant']} |"))
        assert cell in row


# --- a stored run with zero flips, through the real analysis ---------------------------

def test_stored_run_with_zero_flips_in_every_format(tmp_path):
    """No item flips: the document, the Markdown and the terminal all show the gate's
    lower bound at the policy's alpha (one claim: Holm leaves it): the smaller of the
    score bound -z^2/(n + z^2) and the exact edge test's -(1 - alpha^(1/n)), and the
    verdict follows from it (INCONCLUSIVE at margin 2, with an n to decide)."""
    n = 120
    base, cand = outcomes_with(n, 90, 0, 0)
    assert np.array_equal(base, cand)
    policy = {"gate": {"alpha": 0.05}, "tasks": {"mini_math": {"margin": 2.0}}}
    with ResultsStore.open(tmp_path / "r.sqlite") as s:
        add_plan(s, PlanSpec("z", {"exact": base, "trim": cand}, policy=policy))
        doc = report_document(analyze_run(s, "1", bootstrap=BootstrapSpec(200, seed=1)))
    validate_document(json.loads(render_json(doc)))
    (c,) = doc["tasks"][0]["comparisons"]
    z = stats.norm.ppf(0.95)
    want = min(-z * z / (n + z * z), -(1 - 0.05 ** (1 / n)))
    assert c["interval"]["low"] == pytest.approx(want, abs=1e-9)
    assert c["interval"]["low_alpha"] == pytest.approx(0.05)
    assert c["ci_wald"] == [0.0, 0.0] and c["status"] == "INCONCLUSIVE"
    assert c["verdict"]["n_to_decide"] > n
    for text in (render_markdown(doc), terminal_text(doc, width=200)):
        assert f"{100 * want:+.2f} (α 0.05)" in text
        assert f"+0.00 [{100 * want:+.2f}, " in text  # the task table's Δ cell
        assert f"n to decide {c['verdict']['n_to_decide']}" in text  # what changed
    rows = _gate_cells_markdown(render_markdown(doc))
    (cells,) = rows
    lo, _ = _bound(cells[2])
    hi, _ = _bound(cells[3])
    assert verdict_from_shown(lo, hi, float(cells[4]), float(cells[5]), 0.05) == "INCONCLUSIVE"
    assert cells[7] == str(c["verdict"]["n_to_decide"])
    assert doc["caveats"] and "not interleaved" in doc["caveats"][0]
    for text in (render_markdown(doc), terminal_text(doc, width=200),
                 render_html(doc, fig_format=None), render_junit(doc)):
        assert "not interleaved" in " ".join(text.split())
