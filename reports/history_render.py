"""History for people: a terminal table per series and a self-contained HTML trend page
(accuracy with CIs and speed per run; flagged runs marked in words and in red)."""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from reports import fmt, plots
from reports.page import badge, esc, figure, page, table
from validate.analysis.history import History, Series

HEADERS = ("run", "plan", "git", "n", "accuracy ± SE", "Δ vs trailing (p)", "TTFT p50",
           "TPOT p50", "tokens/s", "flags")


def _cells(series: Series) -> list[list[str]]:
    out = []
    for p in series.points:
        c = p.check
        vs = fmt.DASH if c is None else (
            f"{fmt.pts(c.delta, signed=True)} (p {fmt.pvalue(c.p_worse)}"
            f"{', paired' if c.paired else ''})")
        acc = fmt.DASH if p.accuracy is None else f"{fmt.pts(p.accuracy)} ± {fmt.pts(p.se)}"
        rate = fmt.DASH if p.output_tokens_per_s is None else f"{p.output_tokens_per_s:.1f}"
        out.append([p.label, p.plan_hash[:10], (p.git or fmt.DASH)[:10], str(p.n_items), acc,
                    vs, fmt.seconds(p.ttft_p50), fmt.seconds(p.tpot_p50), rate,
                    "; ".join(p.flags) if p.flags else "ok"])
    return out


def render_history_terminal(history: History, console: Console) -> None:
    parts: list = []
    for s in history.series:
        t = Table(title=f"{s.plan_name} · {s.task} · {s.variant} ({s.points[0].metric})",
                  title_justify="left", header_style="bold")
        for h in HEADERS:
            t.add_column(h, justify="left" if h in ("run", "plan", "git", "flags") else "right")
        for row, p in zip(_cells(s), s.points, strict=True):
            cells = [Text(c) for c in row]
            cells[-1] = Text("FLAG: " + row[-1], style="bold red") if p.flags else Text("ok")
            t.add_row(*cells)
        parts.append(t)
    n = len(history.flagged)
    parts.append(Text(f"{n} flagged point(s)" if n else "no flagged points",
                      style="bold red" if n else "bold green"))
    if not history.series:
        parts.insert(0, Text("no runs in the store match"))
    console.print(Group(*parts))


def _trend_points(series: Series, key: str, scale: float = 1.0,
                  ci_key: str | None = None) -> list[dict]:
    out = []
    for p in series.points:
        value = getattr(p, key)
        lo = hi = None
        interval = getattr(p, ci_key) if ci_key else None
        if interval is not None:
            lo, hi = scale * interval[0], scale * interval[1]
        out.append({"label": p.label, "value": None if value is None else scale * value,
                    "lo": lo, "hi": hi, "flag": bool(p.flags)})
    return out


def render_history_html(history: History, fig_format: str = "svg") -> str:
    body = [f"<h1>v41val history — {len(history.flagged)} flagged point(s)</h1>",
            f"<p>store {esc(history.store)}; trailing window {history.options.window} runs, "
            f"one-sided alpha {history.options.alpha}, speed drop "
            f"{100 * history.options.speed_drop:.0f} %</p>"]
    if not history.series:
        body.append("<p>No runs in the store match.</p>")
    for s in history.series:
        body.append(f"<h2>{esc(s.plan_name)} · {esc(s.task)} · {esc(s.variant)} "
                    f"<small>({esc(s.points[0].metric)})</small></h2>")
        figs = []
        fig = plots.trend(_trend_points(s, "accuracy", 100.0, "ci"),
                          f"{s.task} · {s.variant}: accuracy", "accuracy, % (95% CI)")
        if fig is not None:
            figs.append(figure(plots.figure_uri(fig, fig_format), "Accuracy per run with its "
                               "95% CI; red crosses: flagged runs.", "accuracy trend"))
        fig = plots.trend(_trend_points(s, "ttft_mean", 1000.0, "ttft_ci"),
                          f"{s.task} · {s.variant}: TTFT", "mean TTFT, ms (95% CI)")
        if fig is not None:
            figs.append(figure(plots.figure_uri(fig, fig_format), "Mean time to first token "
                               "per run with its 95% CI.", "TTFT trend"))
        fig = plots.trend(_trend_points(s, "output_tokens_per_s"),
                          f"{s.task} · {s.variant}: throughput", "output tokens/s")
        if fig is not None:
            figs.append(figure(plots.figure_uri(fig, fig_format), "Output throughput per run "
                               "(aggregate over the run window).", "throughput trend"))
        body.append(f'<div class="plots">{"".join(figs)}</div>')
        rows = []
        for row, p in zip(_cells(s), s.points, strict=True):
            cells = [esc(c) for c in row]
            cells[-1] = (badge("FLAG") + " " + esc(row[-1])) if p.flags else badge("ok")
            rows.append(cells)
        body.append(table(HEADERS, rows, name_columns=(0, 1, 2), word_columns=(9,)))
    return page("v41val history", "\n".join(body), "v41val history · format v41val-history v1")


def history_text(history: History, width: int = 160) -> str:
    """The terminal rendering as plain text (for -o with --format terminal)."""
    import io

    buffer = io.StringIO()
    render_history_terminal(history, Console(file=buffer, width=width, highlight=False))
    return buffer.getvalue()
