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


def _speed_axis(task: dict) -> tuple[str, dict]:
    """x value and x error per variant: the throughput speed-up vs the baseline with its
    CI when measured (the baseline sits at 1.0), else the absolute output tokens/s."""
    comps = {c["variant"]: c for c in task["comparisons"]}
    ratios = {v: (c.get("speedups") or {}).get("throughput") for v, c in comps.items()}
    if any(r and _ok(r.get("ratio")) for r in ratios.values()):
        points = {}
        for v in task["variants"]:
            if v["is_baseline"]:
                points[v["variant"]] = (1.0, (0.0, 0.0))
                continue
            r = ratios.get(v["variant"])
            if r and _ok(r.get("ratio")):
                lo, hi = r.get("ci") or (r["ratio"], r["ratio"])
                points[v["variant"]] = (r["ratio"], (r["ratio"] - lo, hi - r["ratio"]))
        return "throughput speed-up vs baseline (x, 95% CI)", points
    points = {}
    for v in task["variants"]:
        s = v.get("speed") or {}
        if _ok(s.get("output_tokens_per_s")):
            points[v["variant"]] = (s["output_tokens_per_s"], (0.0, 0.0))
    return "output tokens/s", points


def accuracy_vs_speed(task: dict) -> Figure | None:
    """One point per variant: accuracy (points, CI) against speed (CI when paired)."""
    label, xs = _speed_axis(task)
    variants = [v for v in task["variants"] if v["variant"] in xs and _ok(v.get("accuracy"))]
    if not variants:
        return None
    fig = new_figure(5.2, 3.4)
    ax = fig.axes[0]
    for i, v in enumerate(variants):
        x, (xlo, xhi) = xs[v["variant"]]
        y = 100 * v["accuracy"]
        lo, hi = v["ci"] if v.get("ci") and _ok(v["ci"][0]) else (v["accuracy"],) * 2
        ax.errorbar([x], [y], xerr=[[xlo], [xhi]], yerr=[[y - 100 * lo], [100 * hi - y]],
                    fmt="o", color=COLORS[i % len(COLORS)], capsize=3, label=v["variant"])
        ax.annotate(v["variant"], (x, y), textcoords="offset points", xytext=(6, 6))
    ax.set_xlabel(label)
    ax.set_ylabel(f"accuracy, % ({task['metric']})")
    ax.set_title(f"{task['task']}: accuracy vs speed")
    return fig


def forest(doc: dict) -> Figure | None:
    """Paired delta (candidate - baseline, points) with its CI per (task, variant), the
    zero line and each row's non-inferiority margin (dashed red at -margin)."""
    rows = [(t["task"], c) for t in doc["tasks"] for c in t["comparisons"]
            if _ok(c.get("delta"))]
    if not rows:
        return None
    fig = new_figure(6.4, 0.5 * len(rows) + 1.3)
    ax = fig.axes[0]
    ys = np.arange(len(rows))[::-1]
    for y, (_task, c) in zip(ys, rows, strict=True):
        d = 100 * c["delta"]
        lo, hi = (100 * c["ci"][0], 100 * c["ci"][1]) if c.get("ci") else (d, d)
        color = {"FAIL": "#C44E52", "INCONCLUSIVE": "#8172B3", "WARN": "#CCB974"}.get(
            c["status"], "#4C72B0")
        ax.errorbar([d], [y], xerr=[[d - lo], [hi - d]], fmt="s", color=color, capsize=3)
        if c.get("verdict"):
            m = -100 * c["verdict"]["margin"]
            ax.plot([m, m], [y - 0.4, y + 0.4], color="#C44E52", linestyle="--", linewidth=1.2)
    ax.axvline(0.0, color="#444444", linewidth=0.8)
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{task} · {c['variant']} ({c['status']})" for task, c in rows])
    ax.set_xlabel("Δ accuracy vs baseline, points (CI); dashed red: -margin")
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
