"""What the ``report`` and ``history`` commands call: open a store, analyse a run, render
a format, write it inside the chosen directory. The CLI only parses and prints."""

from __future__ import annotations

from pathlib import Path

from reports.document import report_document
from reports.errors import ReportInputError
from reports.json_report import render_json
from reports.junit import render_junit
from reports.markdown import render_markdown
from reports.paths import write_text_safely
from reports.terminal import terminal_text
from validate.progress import QUIET, Progress
from validate.store import ResultsStore

REPORT_FORMATS = ("terminal", "md", "html", "json", "junit")
DEMO_REPORT_FILES = {"html": "report.html", "md": "report.md"}  # format -> name in the workspace
HISTORY_FORMATS = ("terminal", "html", "json")


def check_format(fmt: str, allowed: tuple[str, ...]) -> str:
    if fmt not in allowed:
        raise ReportInputError(f"--format: expected one of {', '.join(allowed)}, got {fmt!r}")
    return fmt


def open_store(path: str | Path) -> ResultsStore:
    """Open an existing results store; a missing file is an input error, not a new store."""
    path = Path(path)
    if not path.is_file():
        raise ReportInputError(f"{path}: no results store here (pass --store FILE)")
    return ResultsStore.open(path, read_only=True)


def latency_samples(store: ResultsStore, plan_hash: str, tasks, variants) -> dict:
    """{task: {variant: {"ttft_s": [...], "tpot_s": [...]}}} from the stored timings, for
    the HTML latency distributions."""
    out: dict = {}
    for task in tasks:
        for variant in variants:
            rows = store.timings(plan_hash, variant, task)
            out.setdefault(task, {})[variant] = {
                "ttft_s": [r.ttft_s for r in rows if r.ttft_s is not None],
                "tpot_s": [r.tpot_s for r in rows if r.tpot_s is not None],
            }
    return out


def analyse(store: ResultsStore, run: str, policy_path: str | Path | None = None):
    """The run's ``RunAnalysis`` (``run``: run id, plan hash or prefix, or 'latest')."""
    from validate.analysis.build import analyze_run
    from validate.gate.policy import load_policy

    policy = load_policy(policy_path) if policy_path is not None else None
    return analyze_run(store, None if run == "latest" else run, policy=policy)


def render_report(doc: dict, fmt: str, samples: dict | None = None, width: int = 160) -> str:
    check_format(fmt, REPORT_FORMATS)
    if fmt == "terminal":
        return terminal_text(doc, width=width)
    if fmt == "md":
        return render_markdown(doc)
    if fmt == "html":  # matplotlib (0.2 s to import) for the plots: HTML only
        from reports.html import render_html

        return render_html(doc, samples)
    if fmt == "json":
        return render_json(doc)
    return render_junit(doc)


def build_report(store_path: str | Path, run: str, fmt: str,
                 policy_path: str | Path | None = None,
                 progress: Progress = QUIET) -> tuple[dict, dict | None]:
    """(report document, latency samples for HTML or None); ``progress`` shows the
    analysis (its statistics and bootstraps are what takes time on a large run)."""
    check_format(fmt, REPORT_FORMATS)
    with open_store(store_path) as store, progress.bar("analysing the run", None):
        analysis = analyse(store, run, policy_path)
        samples = None
        if fmt == "html":
            samples = latency_samples(store, analysis.identity.plan_hash, analysis.tasks,
                                      analysis.variants)
    return report_document(analysis), samples


def write_reports(doc: dict, store_path: str | Path, directory: str | Path,
                  files: dict[str, str] | None = None) -> dict[str, str]:
    """Render ``doc`` once per format of ``files`` (format -> file name) into
    ``directory`` (never outside it); the written paths by format. HTML gets the full
    latency distributions from the store (stored timings, no recomputation)."""
    files = DEMO_REPORT_FILES if files is None else files
    samples = None
    if "html" in files:
        with open_store(store_path) as store:
            samples = latency_samples(store, doc["run"]["plan_hash"],
                                      [t["task"] for t in doc["tasks"]],
                                      [v["variant"] for v in doc["variants"]])
    return {fmt: str(write_text_safely(name, render_report(doc, fmt, samples), directory))
            for fmt, name in files.items()}


def demo_document(result) -> dict:
    """The report document of a ``v41val demo`` run (``validate.demo.DemoResult``): the
    run's document plus ``"demo"``: what the demo chose, one sentence per optimization
    saying what the run shows, and the HTML and Markdown reports it wrote into its
    workspace (which show those sentences too)."""
    from validate.demo.conclusions import optimization_sentences

    doc = report_document(result.execution.analysis)
    doc["demo"] = result.demo_dict()
    doc["demo"]["conclusions"] = optimization_sentences(doc)
    doc["demo"]["reports"] = write_reports(doc, result.execution.store_path,
                                           result.settings.workspace)
    return doc
