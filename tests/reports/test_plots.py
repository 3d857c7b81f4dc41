"""The HTML figures: variant names never overlap, accuracy bars are the Wilson interval
(inside 0-100 %), loglikelihood tasks are not all drawn at 0 output tokens/s, and the
forest plot's bars are the gate's bounds."""

from __future__ import annotations

import copy
import itertools

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text
from statsmodels.stats.proportion import proportion_confint

from reports import plots


def _drawn(fig):
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _name_boxes(fig, names):
    """Window extents of every visible text artist that names a variant."""
    renderer = _drawn(fig)
    found = {id(t): t for t in fig.findobj(Text)}
    return [(t.get_text(), t.get_window_extent(renderer)) for t in found.values()
            if t.get_visible() and t.get_text() in names]


def _close_variants(doc) -> dict:
    """A task whose five variants sit almost on one point: labels beside the markers
    would pile up (issue 17)."""
    task = copy.deepcopy(doc["tasks"][0])
    template = next(c for c in task["comparisons"])
    base = task["variants"][0]
    task["variants"] = [base]
    task["comparisons"] = []
    for k in range(4):
        v = copy.deepcopy(base) | {"variant": f"fused_op_{k}", "is_baseline": False,
                                   "accuracy": base["accuracy"] + 0.0005 * k}
        task["variants"].append(v)
        c = copy.deepcopy(template) | {"variant": v["variant"]}
        c["speedups"] = {"throughput": {"ratio": 1.0 + 0.002 * k, "ci": None, "n": 100}}
        task["comparisons"].append(c)
    return task


def test_variant_names_do_not_overlap(doc):
    task = _close_variants(doc)
    names = {v["variant"] for v in task["variants"]}
    fig = plots.accuracy_vs_speed(task)
    boxes = _name_boxes(fig, names)
    assert sorted(n for n, _ in boxes) == sorted(names)  # each named once (the legend)
    for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
        assert not box_a.overlaps(box_b), (a, b)


def test_accuracy_bars_are_wilson_and_stay_inside_0_100(doc):
    task = copy.deepcopy(doc["tasks"][0])
    low = task["variants"][1]
    k, n = 1, 100
    low["accuracy"] = k / n
    low["ci"] = list(proportion_confint(k, n, alpha=0.05, method="wilson"))
    fig = plots.accuracy_vs_speed(task)
    ax = fig.axes[0]
    # errorbar containers: (data line, caplines, barlinecols); y bars are the 2nd collection
    container = ax.containers[1]
    segments = container.lines[2][-1].get_segments()
    ys = np.array([seg[:, 1] for seg in segments]).ravel()
    assert ys.min() == pytest.approx(100 * low["ci"][0]) and ys.min() > 0.0
    assert ys.max() == pytest.approx(100 * low["ci"][1])


def test_a_perfect_score_draws_its_wilson_bar(doc):
    """At 30 of 30 the document's Wilson upper bound came out 0.9999999999999999 (one ulp
    below the mean; statsmodels rounds to 1.0): the bar above is empty, not an error (the
    demo crashed here)."""
    task = copy.deepcopy(doc["tasks"][0])
    top = task["variants"][1]
    top["accuracy"] = 1.0
    low, _ = proportion_confint(30, 30, alpha=0.05, method="wilson")
    top["ci"] = [low, float(np.nextafter(1.0, 0.0))]
    ax = plots.accuracy_vs_speed(task).axes[0]
    segments = ax.containers[1].lines[2][-1].get_segments()
    ys = np.array([seg[:, 1] for seg in segments]).ravel()
    assert ys.min() == pytest.approx(100 * top["ci"][0]) and ys.max() == pytest.approx(100.0)


def _loglikelihood(doc) -> dict:
    """No generated tokens: output tokens/s is 0 for everyone, no throughput ratio, but
    request latencies (e2e) were timed and paired."""
    task = copy.deepcopy(doc["tasks"][0])
    for v in task["variants"]:
        v["speed"] = v["speed"] | {"output_tokens_per_s": 0.0, "tpot_s": None,
                                   "e2e_s": {"p50": 0.2, "p90": 0.3, "p99": 0.4, "mean": 0.22,
                                             "n": 100}}
    for i, c in enumerate(task["comparisons"]):
        c["speedups"] = {"e2e": {"ratio": 1.5 + i, "ci": [1.4 + i, 1.6 + i], "n": 100}}
    return task


def test_loglikelihood_task_is_not_plotted_at_zero_tokens_per_s(doc):
    task = _loglikelihood(doc)
    fig = plots.accuracy_vs_speed(task)
    ax = fig.axes[0]
    assert "tokens/s" not in ax.get_xlabel() and "latency speed-up" in ax.get_xlabel()
    xs = sorted(float(c.lines[0].get_xdata()[0]) for c in ax.containers)
    assert xs == pytest.approx([1.0, 1.5, 2.5])  # baseline at 1, then each e2e ratio


def test_without_any_timing_the_speed_axis_says_na(doc):
    task = copy.deepcopy(doc["tasks"][0])
    for v in task["variants"]:
        v["speed"] = None
    for c in task["comparisons"]:
        c["speedups"] = {}
    fig = plots.accuracy_vs_speed(task)
    assert "n/a" in fig.axes[0].get_xlabel()
    assert plots.speed_axis_label(task).startswith("speed n/a")


def test_forest_bars_are_the_gate_bounds(doc):
    fig = plots.forest(doc)
    ax = fig.axes[0]
    rows = [c for t in doc["tasks"] for c in t["comparisons"]]
    for container, c in zip(ax.containers, rows, strict=True):
        (seg,) = container.lines[2][0].get_segments()
        assert sorted(seg[:, 0]) == pytest.approx(
            [100 * c["interval"]["low"], 100 * c["interval"]["high"]])
