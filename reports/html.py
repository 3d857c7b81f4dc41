"""The HTML run report: one self-contained file (inline SVG plots, inline styles, no
script, no network) with the tables of the terminal report, an accuracy-vs-speed plot per
task, a forest plot of the paired deltas with the margins, latency distributions, and a
per-item drill-down of the flips. Items are named by id only (never GPQA's text)."""

from __future__ import annotations

from reports import engagement_tables, fmt, gate_table, headline, plots, rows
from reports.page import badge, esc, figure, page, table


def _task_section(task: dict, samples: dict | None, fig_format: str | None) -> str:
    cells = []
    verdict_col = rows.COLUMNS.index("verdict")
    for r in rows.task_rows(task):
        row = [esc(r[c]) for c in rows.COLUMNS]
        row[verdict_col] = badge(r["status"])
        cells.append(row)
    out = [f"<h2>{esc(task['task'])} <small>({esc(task['metric'])})</small></h2>"]
    if task.get("floor"):
        out.append('<p class="note">The baseline is at the accuracy floor on this task: '
                   "read fidelity first.</p>")
    out.append('<div class="scroll">' + table(rows.COLUMNS, cells, word_columns=(verdict_col,))
               + "</div>")
    legend = rows.interval_legend(task)
    if legend:
        out.append(f'<p class="note">{esc(legend)}</p>')
    figs = []
    fig = plots.accuracy_vs_speed(task) if fig_format else None
    if fig is not None:
        figs.append(figure(plots.figure_uri(fig, fig_format),
                           "Accuracy (y, Wilson 95% CI) against speed (x, " + plots.speed_axis_label(task)
                           + "); one marker per variant, named in the legend.",
                           f"accuracy vs speed, {task['task']}"))
    fig = plots.latency_distributions(task, (samples or {}).get(task["task"])) if fig_format else None
    if fig is not None:
        figs.append(figure(plots.figure_uri(fig, fig_format),
                           f"Latency per request and variant on {task['task']}.",
                           f"latency, {task['task']}"))
    out.append(f'<div class="plots">{"".join(figs)}</div>')
    out.append(_drilldown(task))
    return "\n".join(out)


def _gate_section(doc: dict) -> str:
    found = gate_table.gate_rows(doc)
    if not found:
        return ""
    cols = gate_table.COLUMNS
    verdict_col = cols.index("verdict")
    cells = []
    for r in found:
        row = [esc(r[c]) for c in cols]
        row[verdict_col] = badge(r["status"])
        cells.append(row)
    return (f"<h2>{esc(gate_table.title(doc))}</h2>"
            f'<div class="scroll">{table(cols, cells, word_columns=(verdict_col,))}</div>'
            f'<p class="note">{esc(gate_table.rule(doc))}</p>')


def _engagement_section(doc: dict) -> str:
    """The engagement, breakdown and A/A tables ('' when the run has no ledger)."""
    parts = []
    for title, cols, found, legend in engagement_tables.tables(doc):
        head = "".join(f"<th>{esc(c)}</th>" for c in cols)
        body = "".join("<tr>" + "".join(f"<td>{esc(r[c])}</td>" for c in cols) + "</tr>"
                       for r in found)
        parts.append(f"<h3>{esc(title)}</h3><table><tr>{head}</tr>{body}</table>"
                     + (f'<p class="note">{esc(legend)}</p>' if legend else ""))
    return "".join(parts)


def _headline_section(doc: dict) -> str:
    h = doc.get("headline")
    if h is None:
        return f'<p class="note">{esc(headline.NOT_MEASURED)}</p>'
    cells = [[esc(r[c]) for c in headline.COLUMNS] for r in headline.rows(h)]
    return (f"<h2>{esc(headline.title(h))}</h2>"
            f'<div class="scroll">{table(headline.COLUMNS, cells)}</div>'
            f'<p class="note">{esc(headline.FOOTNOTE)}</p>')


def _ids(ids: list[str]) -> str:
    return f'<div class="ids">{esc(", ".join(ids)) if ids else fmt.DASH}</div>'


def _verdict_details(c: dict) -> str:
    v = c.get("verdict")
    if not v:
        reasons = c.get("health_failures") or []
        return f"<p>not gated{': ' + esc('; '.join(reasons)) if reasons else ''}</p>"
    bits = [f"margin {fmt.margin_points(v['margin'])} pts",
            f"alpha {v['alpha']} one-sided ({esc(v['correction'])})",
            f"lower bound {gate_table.bound_text(v.get('lower_bound'), v.get('bound_alpha'))}",
            f"upper bound {gate_table.bound_text(v.get('upper_bound'), v.get('upper_bound_alpha'))}",
            f"p(non-inferior) adj {fmt.pvalue(v.get('p_noninferior_adjusted'))}",
            f"p(fail) adj {fmt.pvalue(v.get('p_fail_adjusted'))}",
            f"MDE {fmt.pts(v.get('mde'))} pts"]
    if v.get("n_to_decide") is not None:
        bits.append(f"n to decide {v['n_to_decide']}")
    text = "; ".join(bits) + (f"; test: {esc(v.get('test') or '')}")
    if v.get("reasons"):
        text += "; " + esc("; ".join(v["reasons"]))
    return f"<p>{text}</p>"


def _drilldown(task: dict) -> str:
    parts = []
    for c in task["comparisons"]:
        flips = c["flips"]
        t = c.get("table") or {}
        parts.append(
            f"<details><summary>{esc(c['variant'])} vs {esc(c['baseline'])}: "
            f"{badge(c['status'])} — {len(flips['right_to_wrong'])} right→wrong, "
            f"{len(flips['wrong_to_right'])} wrong→right</summary>"
            f"{_verdict_details(c)}"
            f"<p>2×2 table: both right {t.get('both_right', fmt.DASH)}, b (baseline only) "
            f"{t.get('b', fmt.DASH)}, c (candidate only) {t.get('c', fmt.DASH)}, both wrong "
            f"{t.get('both_wrong', fmt.DASH)}, n {t.get('n', fmt.DASH)}</p>"
            f"<h4>right → wrong (item#repeat)</h4>{_ids(flips['right_to_wrong'])}"
            f"<h4>wrong → right (item#repeat)</h4>{_ids(flips['wrong_to_right'])}</details>")
    if not parts:
        return ""
    return "<h3>Flips (per-item drill-down, ids only)</h3>" + "".join(parts)


def render_html(doc: dict, latency_samples: dict | None = None,
                fig_format: str | None = "svg") -> str:
    """The report page (``fig_format`` "svg", "png", or None for no figures). ``latency_samples``: optional per-request latencies
    ``{task: {variant: {"ttft_s": [...], "tpot_s": [...]}}}`` for full distributions
    (``reports.latency.latency_samples`` reads them from the store); without them the
    latency plot shows the summary percentiles."""
    r = doc["run"]
    ident = "".join(f"<tr><td><b>{esc(k)}</b></td><td>{esc(v)}</td></tr>"
                    for k, v in rows.identity_lines(doc))
    changed = "".join(f"<li>{esc(rows.what_changed(doc, v))}</li>" for v in rows.candidates(doc))
    body = [
        f"<h1>v41val report: {esc(r['plan_name'])} — decision {badge(doc['decision'])}</h1>",
        f'<table class="identity">{ident}</table>',
    ]
    shows = "".join(f"<li>{esc(s)}</li>" for s in rows.conclusions(doc))
    if shows:
        body.append(f"<h2>What this run shows</h2><ul>{shows}</ul>")
    if changed:
        body.append(f"<h2>What changed</h2><ul>{changed}</ul>")
    body.append(_gate_section(doc))
    fig = plots.forest(doc) if fig_format else None
    if fig is not None:
        body.append(figure(plots.figure_uri(fig, fig_format), plots.FOREST_CAPTION,
                           "forest plot of paired deltas"))
    body += [_task_section(t, latency_samples, fig_format) for t in doc["tasks"]]
    if any(c.get("speedups") for t in doc["tasks"] for c in t["comparisons"]):
        body.append(f'<p class="note">{esc(rows.SPEED_LEGEND)}</p>')
    body.append(_engagement_section(doc))
    body.append(_headline_section(doc))
    body += [f'<p class="note">note: {esc(n)}</p>' for n in doc.get("notes") or []]
    body += [f'<p class="note">caveat: {esc(n)}</p>' for n in doc.get("caveats") or []]
    per_variant = doc.get("variant_decisions") or {}
    if per_variant:
        body.append("<p>Per optimization: " + ", ".join(
            f"{esc(k)} {badge(v)}" for k, v in per_variant.items()) + "</p>")
    footer = (f"{doc.get('generator', 'v41val')} · report format {doc['format']} "
              f"v{doc['schema_version']} · generated {doc.get('generated_at', '')}")
    return page(f"v41val: {r['plan_name']} — {doc['decision']}", "\n".join(body), footer)
