"""The HTML shell shared by the run report and the history page: one file, styles
inlined, no script, and a Content-Security-Policy that forbids every network fetch (a
report that tried to load a font or a script would show it as a console error in the
Chromium test instead of silently calling out)."""

from __future__ import annotations

import html
from importlib import resources
from string import Template


def _asset(name: str) -> str:
    return (resources.files("reports") / "templates" / name).read_text(encoding="utf-8")


def esc(value) -> str:
    return html.escape(str(value), quote=True)


def page(title: str, body: str, footer: str = "") -> str:
    return Template(_asset("page.html")).substitute(
        title=esc(title), style=_asset("report.css"), body=body, footer=esc(footer))


def badge(word: str) -> str:
    return f'<span class="badge v-{esc(word)}">{esc(word)}</span>'


def figure(uri: str | None, caption: str, alt: str) -> str:
    if uri is None:
        return ""
    return (f'<figure><img src="{uri}" alt="{esc(alt)}">'
            f"<figcaption>{esc(caption)}</figcaption></figure>")


def table(headers, body_rows, name_columns=(0,), word_columns=()) -> str:
    """``body_rows``: lists of already-escaped HTML cells."""
    head = "".join(
        f'<th class="{"name" if i in name_columns or i in word_columns else ""}">{esc(h)}</th>'
        for i, h in enumerate(headers))
    lines = []
    for row in body_rows:
        cells = "".join(
            f'<td class="{"name" if i in name_columns else "word" if i in word_columns else ""}">'
            f"{c}</td>" for i, c in enumerate(row))
        lines.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(lines)}</tbody></table>"
