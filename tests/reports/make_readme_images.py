"""Regenerate the README's report images from a real run:

    v41val demo --workspace /tmp/demo-ws
    python tests/reports/make_readme_images.py --store /tmp/demo-ws/results.sqlite [--run 1]

Without ``--store`` it renders the example run of ``builders.make_analysis`` (outcomes
constructed with known 2x2 tables, pushed through the real statistics and gate; speeds
are example figures). Writes
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


def _document(argv: list[str]) -> tuple[dict, dict | None]:
    import argparse

    from reports.api import build_report

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="results store of a real run (e.g. a demo workspace)")
    parser.add_argument("--run", default="latest", help="run id, plan hash or 'latest'")
    args = parser.parse_args(argv)
    if args.store is None:
        return report_document(make_analysis()), None
    return build_report(args.store, args.run, "html")


def main(argv: list[str] | None = None) -> None:
    out = HERE.parent.parent / "docs" / "img"
    out.mkdir(parents=True, exist_ok=True)
    doc, samples = _document(sys.argv[1:] if argv is None else argv)
    (out / "terminal.txt").write_text(terminal_text(doc, width=160), encoding="utf-8")
    (out / "terminal.svg").write_text(terminal_svg(doc, width=160), encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "report.html"
        html.write_text(render_html(doc, samples), encoding="utf-8")
        result = load(html, screenshot=out / "report.png", size=(1500, 2150))
    if result.console or result.screenshot is None:
        raise SystemExit(f"chromium problem: {result.console or result.returncode}")
    print(f"wrote {out}/report.png, terminal.txt, terminal.svg")


if __name__ == "__main__":
    main()
