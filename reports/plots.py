"""Figures of the HTML reports, drawn with matplotlib's object API (no pyplot, so no
global figure state and no GUI backend) and returned as ``data:`` URIs to inline.

Inlining keeps the HTML one self-contained file that opens offline and from a CI
artifact store, with no network request (the page's Content-Security-Policy forbids
them). SVG is the default: text is drawn as paths (no font lookup on the reader's
machine) and a ``<img>`` keeps each figure's internal ids out of the page's DOM.
"""

from __future__ import annotations

import base64
import io
import math

import matplotlib
import numpy as np
from matplotlib.figure import Figure

COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3",
          "#8C8C8C")
RC = {"svg.hashsalt": "v41val", "svg.fonttype": "path", "font.size": 9,
      "axes.spines.top": False, "axes.spines.right": False}


def figure_uri(fig: Figure, fmt: str = "svg") -> str:
    """Encode ``fig`` as a base64 ``data:`` URI (svg or png)."""
    buffer = io.BytesIO()
    with matplotlib.rc_context(RC):
        meta = {"Date": None} if fmt == "svg" else {}
        fig.savefig(buffer, format=fmt, bbox_inches="tight", metadata=meta, dpi=110)
    mime = "image/svg+xml" if fmt == "svg" else "image/png"
    return f"data:{mime};base64,{base64.b64encode(buffer.getvalue()).decode('ascii')}"


def new_figure(width: float, height: float) -> Figure:
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(width, height))
        fig.add_subplot(1, 1, 1)
    return fig


def _ok(x) -> bool:
    return x is not None and math.isfinite(x)


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
FOREST_CAPTION = ("Paired Δ (candidate − baseline) with the interval the gate decided on: "
                  "its one-sided lower and upper bounds, each at the claim's family-adjusted "
                  "level (ungated rows: the two-sided score interval); dashed red marks "
                  "−margin of the task's policy. The bar never collapses to a point when "
                  "nothing flips, because the gate's bound does not.")


def _ratio_points(task: dict, metric: str) -> dict:
    """{variant: (ratio, (minus, plus))} of one speed-up, the baseline at 1.0; {} when
    no candidate has it."""
    points = {}
    for c in task["comparisons"]:
        r = (c.get("speedups") or {}).get(metric)
        if r and _ok(r.get("ratio")) and r["ratio"] > 0:
            lo, hi = r.get("ci") or (r["ratio"], r["ratio"])
            lo, hi = (r["ratio"], r["ratio"]) if not (_ok(lo) and _ok(hi)) else (lo, hi)
            points[c["variant"]] = (r["ratio"], (r["ratio"] - lo, hi - r["ratio"]))
    if not points:
        return {}
    base = next((v["variant"] for v in task["variants"] if v["is_baseline"]), None)
    return {base: (1.0, (0.0, 0.0)), **points} if base else points


def _speed_axis(task: dict) -> tuple[str | None, dict]:
    """The x axis (label, {variant: (x, (minus, plus))}), in order of preference:
    - the throughput speed-up vs the baseline (the baseline at 1.0), when tokens were
      generated;
    - the absolute output tokens/s, when some variant generated tokens;
    - for loglikelihood tasks (no generated tokens, so tokens/s is 0 for everyone) the
      end-to-end latency speed-up (ratio of median request latency, paired CI), else
      the median request latency;
    - (None, {}) when nothing was timed: the plot then says speed n/a."""
    ratio = _ratio_points(task, "throughput")
    if ratio:
        return "throughput speed-up vs baseline (aggregate tok/s ratio, no CI)", ratio
    points = {}
    for v in task["variants"]:
        s = v.get("speed") or {}
        if _ok(s.get("output_tokens_per_s")) and s["output_tokens_per_s"] > 0:
            points[v["variant"]] = (s["output_tokens_per_s"], (0.0, 0.0))
    if points:
        return "output tokens/s (quality pass)", points
    ratio = _ratio_points(task, "e2e")
    if ratio:
        return ("request latency speed-up vs baseline (no generated tokens: ratio of median "
                "end-to-end latency, 95% CI)"), ratio
    for v in task["variants"]:
        e2e = (v.get("speed") or {}).get("e2e_s") or {}
        if _ok(e2e.get("p50")):
            points[v["variant"]] = (1000 * e2e["p50"], (0.0, 0.0))
    if points:
        return "median request latency, ms (no generated tokens)", points
    return None, {}


def speed_axis_label(task: dict) -> str:
    label, _ = _speed_axis(task)
    return label or "speed n/a: nothing timed"


def accuracy_vs_speed(task: dict) -> Figure | None:
    """One marker per variant: accuracy (points, the document's Wilson CI) against
    speed (CI when paired). Variants are named in a legend outside the axes, never by
    labels beside the markers, which overlapped whenever two variants were close."""
    label, xs = _speed_axis(task)
    variants = [v for v in task["variants"] if _ok(v.get("accuracy"))
                and (label is None or v["variant"] in xs)]
    if not variants:
        return None
    fig = new_figure(6.4, 3.4)
    ax = fig.axes[0]
    for i, v in enumerate(variants):
        x, (xlo, xhi) = xs[v["variant"]] if label is not None else (float(i), (0.0, 0.0))
        y = 100 * v["accuracy"]
        lo, hi = v["ci"] if v.get("ci") and _ok(v["ci"][0]) else (v["accuracy"],) * 2
        # clipped at 0: a Wilson bound of 0.9999999999999999 at 100 % is -1e-14 below
        # the mean in float, which matplotlib refuses (the demo at 100 % crashed here)
        ax.errorbar([x], [y], xerr=[[max(0.0, xlo)], [max(0.0, xhi)]],
                    yerr=[[max(0.0, y - 100 * lo)], [max(0.0, 100 * hi - y)]],
                    fmt=MARKERS[i % len(MARKERS)], color=COLORS[i % len(COLORS)], capsize=3,
                    label=v["variant"])
    if label is None:
        ax.set_xticks([])
    ax.set_xlabel(label or "speed n/a: no request was timed")
    ax.set_ylabel(f"accuracy, % ({task['metric']})")
    ax.set_title(f"{task['task']}: accuracy vs speed")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False, borderaxespad=0.0)
    return fig


def forest(doc: dict) -> Figure | None:
    """Paired delta (candidate - baseline, points) with the document's ``interval`` (the
    gate's bounds when gated) per (task, variant), the zero line and each row's
    non-inferiority margin (dashed red at -margin)."""
    rows = [(t["task"], c) for t in doc["tasks"] for c in t["comparisons"]
            if _ok(c.get("delta"))]
    if not rows:
        return None
    fig = new_figure(6.4, 0.5 * len(rows) + 1.3)
    ax = fig.axes[0]
    ys = np.arange(len(rows))[::-1]
    for y, (_task, c) in zip(ys, rows, strict=True):
        d = 100 * c["delta"]
        i = c.get("interval") or {}
        lo = 100 * i["low"] if _ok(i.get("low")) else d
        hi = 100 * i["high"] if _ok(i.get("high")) else d
        color = {"FAIL": "#C44E52", "INCONCLUSIVE": "#8172B3", "WARN": "#CCB974"}.get(
            c["status"], "#4C72B0")
        ax.errorbar([d], [y], xerr=[[d - lo], [hi - d]], fmt="s", color=color, capsize=3)
        if c.get("verdict"):
            m = -100 * c["verdict"]["margin"]
            ax.plot([m, m], [y - 0.4, y + 0.4], color="#C44E52", linestyle="--", linewidth=1.2)
    ax.axvline(0.0, color="#444444", linewidth=0.8)
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{task} · {c['variant']} ({c['status']})" for task, c in rows])
    ax.set_xlabel("Δ accuracy vs baseline, points (gate bounds); dashed red: -margin")
    ax.set_title("paired deltas")
    return fig


def latency_distributions(task: dict, samples: dict | None = None) -> Figure | None:
    """TTFT and TPOT per variant: empirical CDFs from per-request samples when given
    (``{variant: {"ttft_s": [...], "tpot_s": [...]}}``), else p50/p90/p99 markers."""
    have_samples = bool(samples) and any(
        len(samples.get(v["variant"], {}).get(k) or []) for v in task["variants"]
        for k in ("ttft_s", "tpot_s"))
    have_pcts = any((v.get("speed") or {}).get("ttft_s") for v in task["variants"])
    if not have_samples and not have_pcts:
        return None
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(7.2, 2.9))
        axes = fig.subplots(1, 2)
    for ax, key, title in ((axes[0], "ttft_s", "TTFT"), (axes[1], "tpot_s", "TPOT")):
        for i, v in enumerate(task["variants"]):
            color = COLORS[i % len(COLORS)]
            name = v["variant"]
            values = np.sort(np.asarray((samples or {}).get(name, {}).get(key) or [], float))
            values = values[np.isfinite(values)]
            if have_samples and values.size:
                frac = np.arange(1, values.size + 1) / values.size
                ax.step(1000 * values, frac, where="post", color=color, label=name)
                continue
            pct = (v.get("speed") or {}).get(key)
            if pct and _ok(pct.get("p50")):
                qs = [(0.5, pct.get("p50")), (0.9, pct.get("p90")), (0.99, pct.get("p99"))]
                qs = [(q, x) for q, x in qs if _ok(x)]
                ax.plot([1000 * x for _, x in qs], [q for q, _ in qs], "o-", color=color,
                        label=name)
        ax.set_xlabel(f"{title}, ms")
        ax.set_ylabel("fraction of requests ≤ x")
        ax.set_title(f"{task['task']}: {title}" + ("" if have_samples else " p50 / p90 / p99"),
                     fontsize=8)
        if ax.get_legend_handles_labels()[0]:  # nothing to label: no TTFT/TPOT measured
            ax.legend(loc="lower right", frameon=False)
    return fig


def trend(points: list[dict], title: str, ylabel: str, key: str = "value") -> Figure | None:
    """A history series: ``points`` = [{"label", "value", "lo", "hi", "flag"}] in time
    order; flagged runs are drawn as red crosses."""
    pts = [p for p in points if _ok(p.get(key))]
    if not pts:
        return None
    fig = new_figure(6.4, 2.6)
    ax = fig.axes[0]
    x = np.arange(len(pts))
    y = np.array([p[key] for p in pts])
    lo = np.array([p["lo"] if _ok(p.get("lo")) else p[key] for p in pts])
    hi = np.array([p["hi"] if _ok(p.get("hi")) else p[key] for p in pts])
    ax.errorbar(x, y, yerr=[y - lo, hi - y], fmt="o-", color=COLORS[0], capsize=3)
    bad = [i for i, p in enumerate(pts) if p.get("flag")]
    if bad:
        ax.plot(x[bad], y[bad], "x", color="#C44E52", markersize=11, mew=2.5, label="flagged")
        ax.legend(loc="best", frameon=False)
    ax.set_xticks(x)
    ax.set_xticklabels([p["label"] for p in pts], rotation=30, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    return fig
