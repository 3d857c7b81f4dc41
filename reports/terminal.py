"""The terminal report (rich): run identity, one table of variants per task, the table
of what the gate decided on, the "what changed" lines, the caveats and the decision.

Colour is a second channel, never the only one: every verdict is printed as its word
(PASS / WARN / FAIL / INCONCLUSIVE / INVALID), so the report reads the same in a CI log
without ANSI colours or for a colour-blind reader."""

from __future__ import annotations

import io

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from reports import engagement_tables, gate_table, headline, rows

STYLES = {
    "PASS": "bold green", "WARN": "bold yellow", "FAIL": "bold red",
    "INCONCLUSIVE": "bold magenta", "INVALID": "bold white on red", "NOT-GATED": "dim",
    "baseline": "dim", "GO": "bold green", "NO-GO": "bold red", "UNGATED": "bold",
}


def verdict_text(word: str) -> Text:
    return Text(word, style=STYLES.get(word, ""))


def _identity(doc: dict) -> Table:
    table = Table(show_header=False, box=None, pad_edge=False)
    for key, value in rows.identity_lines(doc):
        table.add_row(Text(key, style="bold"), Text(value))
    return table


WIDE = 150  # below this many columns, quality and speed get a table each


def task_table(task: dict, columns=rows.COLUMNS, title: str | None = None) -> Table:
    if title is None:
        title = f"{task['task']} — {task['metric']}"
        if task.get("floor"):
            title += "  (baseline at the floor: read fidelity first)"
    table = Table(title=title, title_justify="left", header_style="bold")
    for name in columns:
        word = name in ("variant", "verdict")
        # verdict words and variant names are never cut: they are what the table says
        # Text, not a str: rich would read "[interval]" in a header as markup and drop it
        table.add_column(Text(name), justify="left" if word else "right", no_wrap=word,
                         min_width=12 if name == "verdict" else None)
    for r in rows.task_rows(task):
        cells = [verdict_text(r["status"]) if c == "verdict" else Text(r[c]) for c in columns]
        table.add_row(*cells)
    return table


def task_tables(task: dict, width: int) -> list[Table]:
    if width >= WIDE:
        return [task_table(task)]
    return [task_table(task, rows.QUALITY_COLUMNS),
            task_table(task, rows.SPEED_COLUMNS, title=f"{task['task']} — speed")]


def _headline_table(h: dict, columns, title: str) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    for name in columns:
        table.add_column(Text(name), justify="left" if name == "variant" else "right",
                         no_wrap=name == "variant")
    for r in headline.rows(h):
        table.add_row(*[Text(r[c]) for c in columns])
    return table


def headline_renderables(doc: dict, width: int = WIDE) -> list:
    """The headline table (two below WIDE columns: points, then ratios) with its
    footnote, or the "not measured" line."""
    h = doc.get("headline")
    if h is None:
        return [Text(headline.NOT_MEASURED, style="italic")]
    if width >= WIDE:
        tables = [_headline_table(h, headline.COLUMNS, headline.title(h))]
    else:
        tables = [_headline_table(h, headline.POINT_COLUMNS, headline.title(h)),
                  _headline_table(h, headline.RATIO_COLUMNS, f"{headline.TITLE} — vs baseline")]
    return [*tables, Text(headline.FOOTNOTE, style="dim")]


def gate_renderables(doc: dict) -> list:
    """The per-claim gate table with its decision rule, or nothing when ungated."""
    found = gate_table.gate_rows(doc)
    if not found:
        return []
    table = Table(title=gate_table.title(doc), title_justify="left", header_style="bold")
    for name in gate_table.COLUMNS:
        # the verdict word is never cut; a narrow terminal wraps the rest, and folds
        # rather than ellipsises a number (a cut bound would hide what was decided on)
        table.add_column(Text(name), justify="left" if name in ("claim", "verdict") else "right",
                         no_wrap=name == "verdict", overflow="fold",
                         min_width=12 if name == "verdict" else None)
    for r in found:
        table.add_row(*[verdict_text(r["status"]) if c == "verdict" else Text(r[c])
                        for c in gate_table.COLUMNS])
    return [table, Text(gate_table.rule(doc), style="dim")]


def engagement_renderables(doc: dict) -> list:
    """The engagement, breakdown and A/A tables (none when the run has no ledger)."""
    out: list = []
    for title, cols, found, legend in engagement_tables.tables(doc):
        table = Table(title=title, title_justify="left", show_lines=False)
        for name in cols:
            table.add_column(name, justify="right" if name in ("n", "Δ pts", "share")
                             else "left")
        for r in found:
            table.add_row(*[r[c] for c in cols])
        out.append(table)
        if legend:
            out.append(Text(legend, style="dim"))
    return out


def renderables(doc: dict, width: int = WIDE) -> list:
    out: list = [Panel(_identity(doc), title="v41val run report", title_align="left")]
    for t in doc["tasks"]:
        out += task_tables(t, width)
        legend = rows.interval_legend(t)
        if legend:
            out.append(Text(legend, style="dim"))
    if any(c.get("speedups") for t in doc["tasks"] for c in t["comparisons"]):
        out.append(Text(rows.SPEED_LEGEND, style="dim"))
    out += gate_renderables(doc)
    out += engagement_renderables(doc)
    out += headline_renderables(doc, width)
    changed = [rows.what_changed(doc, v) for v in rows.candidates(doc)]
    if changed:
        out.append(Text("What changed", style="bold"))
        out += [Text("  " + line) for line in changed]
    for note in doc.get("notes") or []:
        out.append(Text(f"note: {note}", style="italic"))
    for caveat in doc.get("caveats") or []:
        out.append(Text(f"caveat: {caveat}", style="italic"))
    decision = Text("decision: ", style="bold")
    decision.append(verdict_text(doc["decision"]))
    decision.append(f" (exit {doc['exit_code']})")
    per_variant = doc.get("variant_decisions") or {}
    if per_variant:
        decision.append("; per optimization: " + ", ".join(f"{k} {v}" for k, v in per_variant.items()))
    out.append(decision)
    return out


def render_terminal(doc: dict, console: Console) -> None:
    console.print(Group(*renderables(doc, console.width)))


def terminal_text(doc: dict, width: int = 160, color: bool = False) -> str:
    """The report as text (plain or with ANSI codes), e.g. for docs or CI logs."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=color, color_system=
                      "standard" if color else None, highlight=False)
    render_terminal(doc, console)
    return buffer.getvalue()


def terminal_svg(doc: dict, width: int = 160, title: str = "v41val report") -> str:
    """The coloured report as an SVG (rich's export), for the README."""
    console = Console(record=True, width=width, file=io.StringIO(), force_terminal=True,
                      highlight=False)
    render_terminal(doc, console)
    return console.export_svg(title=title)
