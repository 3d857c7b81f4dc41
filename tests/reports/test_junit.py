"""JUnit XML: parses, one test case per (task, optimization), failures/errors/skips as
documented in reports.junit."""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET

from builders import TABLES

from reports.junit import render_junit


def _cases(xml_text: str):
    root = ET.fromstring(xml_text.split("?>", 1)[1])
    return root, root.findall("./testsuite/testcase")


def test_one_case_per_task_and_optimization(doc):
    root, cases = _cases(render_junit(doc))
    got = sorted((c.get("classname").removeprefix("v41val."), c.get("name")) for c in cases)
    assert got == sorted(TABLES)
    suite = root.find("testsuite")
    assert int(suite.get("tests")) == len(TABLES)
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["decision"] == doc["decision"] and props["exit_code"] == str(doc["exit_code"])


def test_verdicts_map_to_failure_skipped_and_pass(doc):
    _, cases = _cases(render_junit(doc))
    status = {(t["task"], c["variant"]): c["status"] for t in doc["tasks"] for c in t["comparisons"]}
    for case in cases:
        key = (case.get("classname").removeprefix("v41val."), case.get("name"))
        kids = {child.tag for child in case} - {"system-out"}
        expected = {"FAIL": {"failure"}, "INCONCLUSIVE": {"skipped"}, "PASS": set(),
                    "WARN": set()}[status[key]]
        assert kids == expected, key


def test_invalid_is_an_error_and_prove_safe_inconclusive_fails(doc):
    d = copy.deepcopy(doc)
    d["policy"]["mode"] = "prove-safe"
    first = d["tasks"][0]["comparisons"][0]
    first["status"] = "INVALID"
    first["verdict"]["verdict"] = "INVALID"
    first["verdict"]["reasons"] = ["coverage 90.00 % < 100.00 %"]
    root, cases = _cases(render_junit(d))
    error = cases[0].find("error")
    assert error is not None and "coverage 90.00 %" in error.get("message")
    inconclusive = [c for c in cases if "INCONCLUSIVE" in (c.findtext("system-out") or "")]
    assert inconclusive and all(c.find("failure") is not None for c in inconclusive)
    assert int(root.get("errors")) == 1
