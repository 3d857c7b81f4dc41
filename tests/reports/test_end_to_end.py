"""From a real results store through the real analysis (validate.analysis.analyze_run)
to every report format and the ``report`` / ``history`` commands."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET

import pytest
from scipy.stats import binomtest
from store_fixture import SECRET_PROMPT, PlanSpec, add_plan, outcomes_with

from reports.document import report_document
from reports.html import render_html
from reports.json_report import recompute_verdicts, render_json, validate_document
from reports.junit import render_junit
from reports.markdown import render_markdown
from reports.terminal import terminal_text
from v41val.cli import main
from validate.analysis.build import analyze_run
from validate.stats import BootstrapSpec
from validate.store import ResultsStore

N = 150
# variant -> (both, b, c) against the baseline "exact"
KNOWN = {"bounded": (100, 3, 2), "fused": (90, 13, 1)}
POLICY = {"gate": {"alpha": 0.05}, "tasks": {"mini_math": {"margin": 5.0}}}


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("e2e") / "results.sqlite"
    base, bounded = outcomes_with(N, *KNOWN["bounded"])
    base2, fused = outcomes_with(N, *KNOWN["fused"])
    assert (base == base2).all()
    with ResultsStore.open(path) as s:
        add_plan(s, PlanSpec("p1", {"exact": base, "bounded": bounded, "fused": fused},
                             ttft_s={"exact": 0.3, "bounded": 0.18, "fused": 0.25},
                             policy=POLICY))
    return path


@pytest.fixture(scope="module")
def doc(store_path):
    with ResultsStore.open(store_path) as s:
        analysis = analyze_run(s, "1", bootstrap=BootstrapSpec(replicates=300, seed=3))
    return report_document(analysis)


def test_json_from_the_real_analysis_validates_and_recomputes(doc):
    parsed = json.loads(render_json(doc))
    validate_document(parsed)
    (task,) = parsed["tasks"]
    got = {c["variant"]: c for c in task["comparisons"]}
    for variant, (both, b, c) in KNOWN.items():
        t = got[variant]["table"]
        assert (t["both_right"], t["b"], t["c"], t["n"]) == (both, b, c, N)
    assert recompute_verdicts(parsed) == {("mini_math", v): got[v]["status"] for v in KNOWN}


def test_what_changed_from_the_store_matches_hand_numbers(doc):
    md = render_markdown(doc)
    for variant, (_, b, c) in KNOWN.items():
        line = next(x for x in md.splitlines() if x.startswith(f"- {variant}:"))
        delta = 100 * (c - b) / N
        se = 100 * math.sqrt(((b + c) - (c - b) ** 2 / N) / (N - 1) / N)
        assert f"{delta:+.2f} pp ± {se:.2f}" in line
        p = binomtest(b, b + c, 0.5).pvalue
        assert f"p = {p:.2g}" in line or f"p = {p:.2f}" in line
    ttft = round(100 * (0.18 / 0.3 - 1))
    assert f"TTFT {ttft:+d} %" in md


def test_no_prompt_text_in_any_format(doc):
    secret = SECRET_PROMPT.split(" ")[0]
    outputs = [terminal_text(doc), render_markdown(doc), render_json(doc), render_junit(doc),
               render_html(doc, fig_format=None)]
    assert all(secret not in text for text in outputs)
    assert "mini-003" in render_json(doc)  # ids are there


def test_junit_from_the_store(doc):
    root = ET.fromstring(render_junit(doc).split("?>", 1)[1])
    cases = root.findall("./testsuite/testcase")
    assert sorted(c.get("name") for c in cases) == sorted(KNOWN)


def cli(capsys, *args) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_report_cli_unknown_run_is_one_line_exit_2(store_path, capsys):
    code, out, err = cli(capsys, "report", "999", "--store", str(store_path))
    assert code == 2 and out == ""
    assert err.startswith("v41val: error:") and err.count("\n") == 1 and "999" in err


def test_report_cli_missing_store_and_escaping_path(store_path, tmp_path, capsys):
    code, _, err = cli(capsys, "report", "1", "--store", str(tmp_path / "none.sqlite"))
    assert code == 2 and "no results store" in err
    code, _, err = cli(capsys, "report", "1", "--store", str(store_path), "-f", "md",
                       "-o", "../escape.md", "--out-dir", str(tmp_path))
    assert code == 2 and "outside the output directory" in err and err.count("\n") == 1
    assert not (tmp_path.parent / "escape.md").exists()


def test_report_cli_writes_json_and_returns_the_decision(store_path, tmp_path, capsys):
    code, _, err = cli(capsys, "report", "1", "--store", str(store_path), "-f", "json",
                       "-o", "out/report.json", "--out-dir", str(tmp_path), "--exit-code")
    written = json.loads((tmp_path / "out" / "report.json").read_text())
    validate_document(written)
    assert code == written["exit_code"] == {"GO": 0, "NO-GO": 1, "INCONCLUSIVE": 3}[
        written["decision"]]


def test_history_cli_json(store_path, capsys):
    code, out, _ = cli(capsys, "history", "--store", str(store_path), "-f", "json")
    d = json.loads(out)
    assert code == 0 and d["format"] == "v41val-history"
    assert {(s["task"], s["variant"]) for s in d["series"]} == {
        ("mini_math", v) for v in ("exact", *KNOWN)}
    code, _, err = cli(capsys, "history", "--store", str(store_path), "--plan", "nope")
    assert code == 2 and "no runs of plan 'nope'" in err
