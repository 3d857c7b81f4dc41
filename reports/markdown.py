"""The Markdown report: the terminal report's tables (the per-task tables, what the gate
decided on, the headline) and a "what changed" line per optimization, ready to paste
into a pull request (GitHub-flavoured tables)."""

from __future__ import annotations

from reports import engagement_tables, gate_table, headline, rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _bold_verdict(word: str) -> str:
    return word if word in ("baseline", "NOT-GATED") else f"**{word}**"


def task_table_md(task: dict) -> str:
    head = f"### {task['task']} — `{task['metric']}`"
    if task.get("floor"):
        head += "\n\n> The baseline is at the accuracy floor on this task: read fidelity first."
    lines = [head, "", "| " + " | ".join(rows.COLUMNS) + " |",
             "|" + "|".join("---" if c in ("variant", "verdict") else "---:" for c in rows.COLUMNS)
             + "|"]
    for r in rows.task_rows(task):
        cells = [_cell(r[c]) for c in rows.COLUMNS]
        cells[rows.COLUMNS.index("verdict")] = _bold_verdict(r["status"])
        lines.append("| " + " | ".join(cells) + " |")
    legend = rows.interval_legend(task)
    return "\n".join(lines + (["", f"_{legend}_"] if legend else []))


def gate_table_md(doc: dict) -> str:
    """The per-claim gate table and its rule; '' when the run is ungated."""
    found = gate_table.gate_rows(doc)
    if not found:
        return ""
    cols = gate_table.COLUMNS
    lines = [f"### {gate_table.title(doc)}", "", "| " + " | ".join(cols) + " |",
             "|" + "|".join("---" if c in ("claim", "verdict") else "---:" for c in cols) + "|"]
    for r in found:
        cells = [_cell(r[c]) for c in cols]
        cells[cols.index("verdict")] = _bold_verdict(r["status"])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines + ["", gate_table.rule(doc)])


def headline_md(doc: dict) -> str:
    h = doc.get("headline")
    if h is None:
        return f"_{headline.NOT_MEASURED}_"
    lines = [f"### {headline.title(h)}", "",
             "| " + " | ".join(headline.COLUMNS) + " |",
             "|" + "|".join("---" if c == "variant" else "---:" for c in headline.COLUMNS) + "|"]
    lines += ["| " + " | ".join(_cell(r[c]) for c in headline.COLUMNS) + " |"
              for r in headline.rows(h)]
    return "\n".join(lines + ["", headline.FOOTNOTE])


def engagement_md(doc: dict) -> list[str]:
    """The engagement, breakdown and A/A tables (none when the run has no ledger)."""
    out = []
    for title, cols, found, legend in engagement_tables.tables(doc):
        out += [f"### {title}", "", "| " + " | ".join(cols) + " |",
                "|" + "|".join("---:" if c in ("n", "Δ pts", "share") else "---"
                               for c in cols) + "|"]
        out += ["| " + " | ".join(_cell(r[c]) for c in cols) + " |" for r in found]
        out += (["", f"_{legend}_"] if legend else []) + [""]
    return out


def render_markdown(doc: dict) -> str:
    r = doc["run"]
    out = [f"## v41val: {r['plan_name']} — decision **{doc['decision']}** "
           f"(exit {doc['exit_code']})", ""]
    shows = rows.conclusions(doc)
    if shows:
        out += ["**What this run shows:**", ""] + [f"- {_cell(s)}" for s in shows] + [""]
    changed = [rows.what_changed(doc, v) for v in rows.candidates(doc)]
    if changed:
        out += ["**What changed** (Δ = candidate − baseline in accuracy points ± paired SE; "
                "p = exact McNemar; in brackets the gate bound the verdict rests on):", ""]
        out += [f"- {_cell(line)}" for line in changed]
        out.append("")
    out += [task_table_md(t) + "\n" for t in doc["tasks"]]
    if any(c.get("speedups") for t in doc["tasks"] for c in t["comparisons"]):
        out += [f"_{rows.SPEED_LEGEND}_", ""]
    gate = gate_table_md(doc)
    out += [gate + "\n"] if gate else []
    out += engagement_md(doc)
    out += [headline_md(doc) + "\n"]
    out += ["<details><summary>Run identity</summary>", ""]
    out += [f"- **{k}**: {_cell(v)}" for k, v in rows.identity_lines(doc)]
    out += ["", "</details>"]
    for note in doc.get("notes") or []:
        out.append(f"\n> note: {_cell(note)}")
    for caveat in doc.get("caveats") or []:
        out.append(f"\n> caveat: {_cell(caveat)}")
    return "\n".join(out) + "\n"
