"""Regenerate the README's report images: ``python tests/reports/make_readme_images.py``.

Renders the example run of ``builders.make_analysis`` (outcomes constructed with known
2x2 tables, pushed through the real statistics and gate; speeds are example figures) as
- docs/img/report.png: a headless-Chromium screenshot of the HTML report,
- docs/img/terminal.txt: the terminal report without colour,
- docs/img/terminal.svg: the coloured terminal report (rich's SVG export).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from builders import make_analysis  # noqa: E402
from chromium import load  # noqa: E402

from reports.document import report_document  # noqa: E402
from reports.html import render_html  # noqa: E402
from reports.terminal import terminal_svg, terminal_text  # noqa: E402


def main() -> None:
    out = HERE.parent.parent / "docs" / "img"
    out.mkdir(parents=True, exist_ok=True)
    doc = report_document(make_analysis())
    (out / "terminal.txt").write_text(terminal_text(doc, width=160), encoding="utf-8")
    (out / "terminal.svg").write_text(terminal_svg(doc, width=160), encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "report.html"
        html.write_text(render_html(doc), encoding="utf-8")
        result = load(html, screenshot=out / "report.png", size=(1500, 2150))
    if result.console or result.screenshot is None:
        raise SystemExit(f"chromium problem: {result.console or result.returncode}")
    print(f"wrote {out}/report.png, terminal.txt, terminal.svg")


if __name__ == "__main__":
    main()
