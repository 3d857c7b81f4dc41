"""Runs that are not a clean A/B still render in every format and validate: no policy
(UNGATED, no verdicts), an unhealthy candidate (INVALID), a continuous metric."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from store_fixture import PlanSpec, add_plan, outcomes_with

from reports.api import build_report
from reports.document import report_document
from reports.html import render_html
from reports.json_report import recompute_verdicts, render_json, validate_document
from reports.junit import render_junit
from reports.markdown import render_markdown
from reports.terminal import terminal_text
from validate.analysis.build import analyze_run
from validate.stats import BootstrapSpec
from validate.store import ResultsStore

POLICY = {"gate": {"alpha": 0.05}, "tasks": {"mini_math": {"margin": 5.0}}}


def _doc(path, run="1"):
    with ResultsStore.open(path) as s:
        return report_document(analyze_run(s, run, bootstrap=BootstrapSpec(200, seed=1)))


def _all_formats(doc) -> dict[str, str]:
    return {"terminal": terminal_text(doc), "md": render_markdown(doc),
            "json": render_json(doc), "junit": render_junit(doc),
            "html": render_html(doc, fig_format=None)}


def test_ungated_run_renders_without_verdicts(tmp_path):
    base, cand = outcomes_with(40, 20, 2, 1)
    with ResultsStore.open(tmp_path / "r.sqlite") as s:
        add_plan(s, PlanSpec("u", {"exact": base, "bounded": cand}))
    doc = _doc(tmp_path / "r.sqlite")
    assert doc["decision"] == "UNGATED" and doc["policy"] is None
    out = _all_formats(doc)
    validate_document(json.loads(out["json"]))
    assert recompute_verdicts(doc) == {}
    assert "NOT-GATED" in out["terminal"] and "NOT-GATED" in out["md"]
    # no gate: the Δ column shows the two-sided Tango score interval, said so under it
    (c,) = doc["tasks"][0]["comparisons"]
    assert c["interval"]["kind"] == "score"
    assert [c["interval"]["low"], c["interval"]["high"]] == c["ci_score"]
    assert "Tango score interval" in out["md"] and "What the gate decided on" not in out["md"]
    case = ET.fromstring(out["junit"].split("?>", 1)[1]).find("./testsuite/testcase")
    assert case.find("skipped") is not None


def test_missing_items_make_the_candidate_invalid_everywhere(tmp_path):
    base, cand = outcomes_with(40, 20, 2, 1)
    with ResultsStore.open(tmp_path / "r.sqlite") as s:
        add_plan(s, PlanSpec("i", {"exact": base, "bounded": cand[:30]}, policy=POLICY))
    doc = _doc(tmp_path / "r.sqlite")
    assert doc["decision"] == "INVALID" and doc["exit_code"] == 4
    (c,) = doc["tasks"][0]["comparisons"]
    assert c["status"] == "INVALID"
    out = _all_formats(doc)
    validate_document(json.loads(out["json"]))
    error = ET.fromstring(out["junit"].split("?>", 1)[1]).find(".//testcase/error")
    assert error is not None and "coverage" in error.get("message")
    assert "INVALID" in out["terminal"] and "**INVALID**" in out["md"]
    assert "coverage" in next(x for x in out["md"].splitlines() if x.startswith("- bounded:"))


def test_latency_samples_come_from_the_store(tmp_path):
    base, cand = outcomes_with(25, 10, 1, 1)
    with ResultsStore.open(tmp_path / "r.sqlite") as s:
        add_plan(s, PlanSpec("l", {"exact": base, "bounded": cand}, policy=POLICY,
                             ttft_s={"exact": 0.3, "bounded": 0.2}))
    doc, samples = build_report(tmp_path / "r.sqlite", "latest", "html")
    got = samples["mini_math"]
    assert np.allclose(got["exact"]["ttft_s"], 0.3) and len(got["exact"]["ttft_s"]) == 25
    assert np.allclose(got["bounded"]["ttft_s"], 0.2)
    assert np.allclose(got["bounded"]["tpot_s"], 0.01)
    assert doc["run"]["plan_hash"] == "l"


@pytest.mark.parametrize("fmt", ["pdf", "HTML"])
def test_unknown_format_is_an_input_error(tmp_path, fmt):
    from reports.errors import ReportInputError

    with pytest.raises(ReportInputError, match="--format"):
        build_report(tmp_path / "missing.sqlite", "1", fmt)
