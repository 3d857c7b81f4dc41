"""The Markdown report: its "what changed" numbers equal a direct recompute from the
known outcomes (hand formulas and scipy, not validate.stats)."""

from __future__ import annotations

import math
import re

import pytest
from builders import BASELINE, MARGINS, SPEEDUP, TABLES
from scipy.stats import binomtest

from reports.markdown import render_markdown

SEGMENT = re.compile(
    r"(?P<task>[\w]+) (?P<delta>[+-]\d+\.\d+) pp ± (?P<se>\d+\.\d+), p = (?P<p>[\d.<]+), "
    r"(?P<verdict>[A-Z]+) at margin (?P<margin>\d+\.\d)")


def _expected(n, b, c):
    """Paired delta and SE in points from the 2x2 table alone; exact McNemar p."""
    delta = (c - b) / n
    var_d = ((b + c) - (c - b) ** 2 / n) / (n - 1)  # sample variance of d_i in {-1, 0, 1}
    se = math.sqrt(var_d / n)
    p = binomtest(b, b + c, 0.5).pvalue if b + c else 1.0
    return 100 * delta, 100 * se, p


def _what_changed_lines(md: str) -> dict[str, str]:
    lines = {}
    for line in md.splitlines():
        m = re.match(r"- (\w+): (.*)$", line)
        if m and m.group(1) in {v for _, v in TABLES}:
            lines[m.group(1)] = m.group(2)
    return lines


def test_what_changed_numbers_equal_a_direct_recompute(doc):
    md = render_markdown(doc)
    lines = _what_changed_lines(md)
    assert set(lines) == {v for _, v in TABLES}
    verdicts = {(t["task"], c["variant"]): c["status"] for t in doc["tasks"]
                for c in t["comparisons"]}
    for variant, line in lines.items():
        segments = {m["task"]: m for m in SEGMENT.finditer(line)}
        tasks = {t for t, v in TABLES if v == variant}
        assert set(segments) == tasks, line
        for task, m in segments.items():
            n, _, b, c = TABLES[(task, variant)]
            delta, se, p = _expected(n, b, c)
            assert float(m["delta"]) == pytest.approx(delta, abs=0.005)
            assert float(m["se"]) == pytest.approx(se, abs=0.005)
            shown = m["p"]
            assert float(shown) == pytest.approx(p, rel=0.05, abs=0.005)
            assert float(m["margin"]) == pytest.approx(100 * MARGINS[task])
            assert m["verdict"] == verdicts[(task, variant)]
        ttft = re.search(r"TTFT ([+-]\d+) %", line)
        assert int(ttft.group(1)) == round(100 * (1 / SPEEDUP[variant] - 1))


def test_markdown_tables_have_one_row_per_variant_and_verdict_words(doc):
    md = render_markdown(doc)
    for task in {t for t, _ in TABLES}:
        section = md.split(f"### {task}")[1].split("###")[0]
        body = [r for r in section.splitlines() if r.startswith("| ") and "variant" not in r]
        names = [r.split("|")[1].strip() for r in body]
        assert names[0] == BASELINE and sorted(names[1:]) == sorted(
            v for t, v in TABLES if t == task)
    assert "**FAIL**" in md and "**PASS**" in md and "decision **NO-GO**" in md


def test_pipes_in_names_do_not_break_the_table(doc):
    import copy
    d = copy.deepcopy(doc)
    d["tasks"][0]["variants"][1]["variant"] = "a|b"
    md = render_markdown(d)
    row = next(r for r in md.splitlines() if r.startswith("| a\\|b"))
    assert row.count(" | ") == 9  # ten cells, escaped pipe does not split
