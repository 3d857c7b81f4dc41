"""The terminal report: identity, one table per task, verdict words that read without
colour, and the decision."""

from __future__ import annotations

import re

from builders import BASELINE, TABLES, outcome_arrays

from reports.terminal import terminal_svg, terminal_text

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _row(text: str, variant: str, after: str) -> str:
    section = text.split(after, 1)[1]
    return next(line for line in section.splitlines() if f"│ {variant} " in line)


def test_plain_text_has_identity_words_and_numbers(doc):
    text = terminal_text(doc, width=200, color=False)
    assert not ANSI.search(text)
    assert "swa-ab" in text and "f" * 12 in text and "0123abc" in text
    assert "decision: NO-GO (exit 1)" in text
    for (task, variant), (n, both, b, c) in TABLES.items():
        row = _row(text, variant, f"{task} —")
        verdict = next(x["status"] for t in doc["tasks"] if t["task"] == task
                       for x in t["comparisons"] if x["variant"] == variant)
        assert verdict in row  # the word, not only a colour
        _, cand = outcome_arrays(n, both, b, c)
        se = cand.std(ddof=1) / len(cand) ** 0.5
        assert f"{100 * cand.mean():.2f} ± {100 * se:.2f}" in row
        assert f"{100 * (c - b) / n:+.2f}" in row
    assert "baseline" in _row(text, BASELINE, "gsm8k —")


def test_colour_is_a_second_channel(doc):
    coloured = terminal_text(doc, width=200, color=True)
    assert ANSI.search(coloured)
    assert ANSI.sub("", coloured).count("FAIL") == terminal_text(doc, width=200).count("FAIL")


def test_svg_export(doc):
    svg = terminal_svg(doc)
    assert svg.lstrip().startswith("<svg") and "NO-GO" in svg


def test_narrow_terminal_never_ellipsises_the_gate_table(doc):
    """At 80 columns the gate table wraps; a bound cut to '-6.2…' would hide what the
    verdict was decided on."""
    text = terminal_text(doc, width=80)
    section = text.split("What the gate decided on (", 1)[1].split("└", 1)[0]
    assert "…" not in section
    assert all(len(line) <= 80 for line in text.splitlines())
    for t in doc["tasks"]:
        for c in t["comparisons"]:
            assert f"{100 * c['verdict']['lower_bound']:+.2f}" in section.replace("\n", " ")
