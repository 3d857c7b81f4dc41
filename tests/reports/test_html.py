"""The HTML report: one self-contained file (no network, no script), every plot inline,
flips by id; and in a real headless Chromium, no console errors and a non-blank render."""

from __future__ import annotations

import base64
import re

import numpy as np
import pytest
from builders import TABLES
from chromium import chromium_binary, load, pixels

from reports import plots
from reports.html import render_html

URL_ATTR = re.compile(r"""(?:src|href)\s*=\s*["']([^"']*)["']""", re.I)


@pytest.fixture(scope="module")
def page(doc):
    return render_html(doc)


def test_self_contained_no_network_no_script(page):
    assert "<script" not in page.lower() and "<link" not in page.lower()
    assert "@import" not in page and "url(" not in page
    refs = URL_ATTR.findall(page)
    assert refs and all(r.startswith("data:image/") for r in refs)
    assert "default-src 'none'" in page  # CSP: the browser refuses any fetch


def test_plots_are_inline_svgs(page, doc):
    images = re.findall(r'src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', page)
    # forest + per task (accuracy-vs-speed + latency)
    assert len(images) == 1 + 2 * len(doc["tasks"])
    for b64 in images:
        svg = base64.b64decode(b64).decode("utf-8")
        assert "<svg" in svg and "http://www.w3.org/2000/svg" in svg
        assert "xlink:href=\"http" not in svg


def test_flips_listed_by_id(page, doc):
    for t in doc["tasks"]:
        for c in t["comparisons"]:
            n, both, b, cc = TABLES[(t["task"], c["variant"])]
            assert f"{b} right→wrong, {cc} wrong→right" in page
            for item in c["flips"]["right_to_wrong"] + c["flips"]["wrong_to_right"]:
                assert item in page


def test_latency_samples_draw_empirical_cdfs(doc):
    task = doc["tasks"][0]
    ttft = np.linspace(0.1, 0.5, 30)
    samples = {v["variant"]: {"ttft_s": list(ttft), "tpot_s": list(ttft / 10)}
               for v in task["variants"]}
    fig = plots.latency_distributions(task, samples)
    ttft_axis = fig.axes[0]
    assert len(ttft_axis.lines) == len(task["variants"])
    x, y = ttft_axis.lines[0].get_data()
    assert np.allclose(x, 1000 * ttft) and np.allclose(y, np.arange(1, 31) / 30)
    # without samples: the summary percentiles, three points per variant
    fig = plots.latency_distributions(task, None)
    assert all(len(line.get_xdata()) == 3 for line in fig.axes[0].lines)


def test_text_is_escaped(doc):
    import copy
    d = copy.deepcopy(doc)
    d["run"]["plan_name"] = "<img src=x onerror=alert(1)>"
    d["tasks"][0]["comparisons"][0]["flips"]["right_to_wrong"] = ["<b>id</b>#0"]
    page = render_html(d, fig_format=None)
    assert "<img src=x" not in page and "<b>id</b>" not in page
    assert "&lt;img src=x" in page


needs_chromium = pytest.mark.skipif(
    chromium_binary() is None,
    reason="chromium not installed (Debian: apt-get install -y chromium); browser test skipped")


@pytest.mark.slow
@needs_chromium
def test_page_loads_in_chromium_without_console_errors_and_renders(page, tmp_path):
    html = tmp_path / "report.html"
    html.write_text(page, encoding="utf-8")
    shot = tmp_path / "report.png"
    result = load(html, screenshot=shot)
    assert result.console == (), result.console
    assert result.screenshot is not None, f"no screenshot (chromium exit {result.returncode})"
    img = pixels(shot)[..., :3]
    assert img.shape[0] >= 1000 and img.std() > 0.05  # not blank
    # The plots rendered: the forest/scatter blue (#4C72B0) and the FAIL red (#C44E52)
    # are painted somewhere on the page.
    for rgb in ((0x4C, 0x72, 0xB0), (0xC4, 0x4E, 0x52)):
        close = np.all(np.abs(img - np.array(rgb) / 255.0) < 0.03, axis=-1)
        assert close.sum() > 50, rgb


@pytest.mark.slow
@needs_chromium
def test_harness_sees_console_errors_on_a_broken_page(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" '
                   "content=\"default-src 'none'\"></head><body>"
                   '<img src="http://example.invalid/x.png"></body></html>', encoding="utf-8")
    result = load(bad)
    assert any("Content Security Policy" in line for line in result.console)
