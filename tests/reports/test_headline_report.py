"""The headline operating points section: the document carries exactly the analysis'
numbers, validates against the schema, and every human-facing renderer shows them; a
run without a sweep says "not measured" everywhere."""

from __future__ import annotations

import copy
import dataclasses
import html
import json

import pytest
from builders import BASELINE, make_analysis

from reports.document import report_document
from reports.errors import ReportInputError
from reports.headline import NOT_MEASURED
from reports.html import render_html
from reports.json_report import render_json, validate_document
from reports.markdown import render_markdown
from reports.terminal import terminal_text
from validate.analysis.model import HeadlineSection
from validate.engines.base import Timings
from validate.speed.headline import compare_headlines, headline
from validate.speed.sweep import SweepResult, choose, measure_point
from validate.speed.types import AGGREGATE, MEDIANS

TARGET, QUANTILE = 35.0, 0.1


def _sweep(scale: float) -> SweepResult:
    """Levels 1, 2, 4 with per-user rates falling as concurrency grows; ``scale`` speeds
    every request up. Requests of a level all start together (one wave)."""
    points = []
    for c, base_rate in ((1, 50.0), (2, 40.0), (4, 22.0)):
        indexed = []
        for i in range(4):
            rate = scale * (base_rate + i)
            ttft = (0.03 + 0.002 * i) / scale
            indexed.append((i, Timings(started_at_s=100.0 + (i // c), e2e_s=ttft + 4 / rate,
                                       ttft_s=ttft, n_prompt_tokens=8, n_output_tokens=5)))
        points.append(measure_point(c, indexed, 0, TARGET, QUANTILE))
    return SweepResult(TARGET, QUANTILE, tuple(points), choose(points))


@pytest.fixture(scope="module")
def section() -> HeadlineSection:
    base, fast = _sweep(1.0), _sweep(1.25)
    return HeadlineSection(
        settings={"sweep_levels": [1, 2, 4], "target_tokens_per_s": TARGET,
                  "user_quantile": QUANTILE, "prompt_tokens": 8, "max_tokens": 5,
                  "requests_per_level": 4, "seed": 0},
        target_tokens_per_s_per_user=TARGET, user_quantile=QUANTILE,
        headlines=(headline(base, BASELINE), headline(fast, "bounded")),
        comparisons=(compare_headlines(base, fast, variant_name="bounded",
                                       baseline_name=BASELINE),),
        points={BASELINE: base.points, "bounded": fast.points})


@pytest.fixture(scope="module")
def swept_doc(section) -> dict:
    return json.loads(render_json(report_document(
        dataclasses.replace(make_analysis(), headline=section))))


def test_document_carries_the_analysis_numbers(section, swept_doc):
    h = swept_doc["headline"]
    assert (h["target_tokens_per_s_per_user"], h["user_quantile"]) == (TARGET, QUANTILE)
    for got, want in zip(h["variants"], section.headlines, strict=True):
        assert got["variant"] == want.variant
        assert got["is_baseline"] == (want.variant == BASELINE)
        for key in ("single_stream_tokens_per_s", "single_stream_ttft_s", "throughput_at_target",
                    "concurrency_at_target", "tokens_per_s_per_user_at_target"):
            assert got[key] == getattr(want, key), key
        points = section.points[want.variant]
        assert [p["concurrency"] for p in got["points"]] == [1, 2, 4]
        assert [p["meets_target"] for p in got["points"]] == [p.meets_target for p in points]
        assert [p["output_tokens_per_s"] for p in got["points"]] == [
            p.summary.output_tokens_per_s for p in points]
    [c] = h["comparisons"]
    want = section.comparisons[0]
    assert c["single_stream_speedup"] == {"ratio": want.single_stream_speedup.ratio,
                                          "ci": list(want.single_stream_speedup.ci),
                                          "n": want.single_stream_speedup.n,
                                          "statistic": MEDIANS}
    assert c["ttft_speedup"]["ratio"] == want.ttft_speedup.ratio
    assert c["throughput_ratio"] == {"ratio": want.throughput_ratio.ratio, "ci": None, "n": 4,
                                     "statistic": AGGREGATE}
    # the sweep has a miss at concurrency 4, so the chosen point is not simply the last
    assert h["variants"][0]["concurrency_at_target"] == 2


def test_document_validates_and_the_schema_checks_the_section(swept_doc):
    validate_document(swept_doc)
    for mutate in (lambda d: d["headline"]["variants"][0]["points"][0].__setitem__(
                       "concurrency", 0),
                   lambda d: d["headline"]["variants"][0].pop("throughput_at_target"),
                   lambda d: d["headline"]["comparisons"][0].__setitem__("speedup", 2.0),
                   lambda d: d["headline"].__setitem__("user_quantile", 1.5)):
        bad = copy.deepcopy(swept_doc)
        mutate(bad)
        with pytest.raises(ReportInputError, match="headline"):
            validate_document(bad)


def _expected_cells(doc: dict) -> list[str]:
    """What a reader must find: rates to 0.1 tok/s, ratios with CIs to 0.01."""
    h = doc["headline"]
    cells = []
    for v in h["variants"]:
        cells += [f"{v['single_stream_tokens_per_s']:.1f}", f"{v['throughput_at_target']:.1f}"]
    c = h["comparisons"][0]
    s = c["single_stream_speedup"]
    cells.append(f"{s['ratio']:.2f}x [{s['ci'][0]:.2f}, {s['ci'][1]:.2f}]")
    t = c["ttft_speedup"]
    cells.append(f"{t['ratio']:.2f}x [{t['ci'][0]:.2f}, {t['ci'][1]:.2f}]")
    cells.append(f"{c['throughput_ratio']['ratio']:.2f}x")
    return cells


@pytest.mark.parametrize("render", [lambda d: terminal_text(d, width=220),
                                    lambda d: terminal_text(d, width=80), render_markdown,
                                    lambda d: render_html(d, fig_format=None)],
                         ids=["terminal", "terminal-narrow", "markdown", "html"])
def test_renderers_show_the_section(swept_doc, render):
    text = html.unescape(render(swept_doc))  # HTML writes ">=" as "&gt;="
    assert "Headline operating points" in text and NOT_MEASURED not in text
    assert ">= 90 % of users decode at >= 35 tok/s" in text
    for cell in _expected_cells(swept_doc):
        assert cell in text, cell


@pytest.mark.parametrize("render", [lambda d: terminal_text(d, width=220), render_markdown,
                                    lambda d: render_html(d, fig_format=None)],
                         ids=["terminal", "markdown", "html"])
def test_without_a_sweep_every_renderer_says_not_measured(doc, render):
    assert doc["headline"] is None
    validate_document(json.loads(render_json(doc)))
    assert NOT_MEASURED in render(doc)
