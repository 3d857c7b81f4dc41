"""JUnit XML: one test case per (task, optimization), so CI systems (GitHub, GitLab,
Jenkins) list gate results next to unit tests.

Mapping of verdicts (a choice, documented here and in docs/nightly.md):
- PASS -> passed; WARN -> passed, with the warning in ``system-out`` (inside the
  margin but significantly worse than the baseline: it passes the gate).
- FAIL -> ``<failure type="FAIL">`` for a critical task; an advisory task never
  decides, so its FAIL is ``<skipped>`` with the reason (visible, not red).
- INCONCLUSIVE -> ``<skipped>`` with the n that would decide, except in ``prove-safe``
  mode on a critical task, where "not shown safe" is NO-GO and so a ``<failure>``.
- INVALID -> ``<error type="INVALID">`` (the run is broken, not the optimization).
- NOT-GATED (no policy for the task) -> ``<skipped>``.
The run decision and exit code are ``<properties>`` of the suite.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from reports import fmt, gate_table, rows


def _outcome(c: dict, mode: str) -> tuple[str | None, str]:
    """(element name or None for a pass, message)."""
    v = c.get("verdict")
    status = c["status"]
    tier = v["tier"] if v else "critical"
    rested = f"; {gate_table.decided_on(c)}" if v and gate_table.decided_on(c) else ""
    if status == "FAIL":
        return ("failure" if tier == "critical" else "skipped"), (
            f"FAIL: worse than the margin ({tier}){rested}")
    if status == "INCONCLUSIVE":
        n = v.get("n_to_decide") if v else None
        msg = "INCONCLUSIVE: " + (f"about {n} items would decide" if n else "undecided") + rested
        return ("failure" if mode == "prove-safe" and tier == "critical" else "skipped"), msg
    if status == "INVALID":
        reasons = (v.get("reasons") if v else None) or c.get("health_failures") or []
        return "error", "INVALID: " + ("; ".join(reasons) or "no paired outcomes")
    if status == "NOT-GATED":
        return "skipped", "NOT-GATED: no policy for this task"
    if status == "WARN":
        return None, ("WARN: inside the margin but significantly worse than the baseline"
                      + rested)
    return None, status + rested


def render_junit(doc: dict) -> str:
    mode = (doc.get("policy") or {}).get("mode", "standard")
    suite = ET.Element("testsuite", name=f"v41val.{doc['run']['plan_name']}")
    props = ET.SubElement(suite, "properties")
    for name, value in (("decision", doc["decision"]), ("exit_code", doc["exit_code"]),
                        ("plan_hash", doc["run"]["plan_hash"]),
                        ("baseline", doc["run"]["baseline"])):
        ET.SubElement(props, "property", name=name, value=str(value))
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for task in doc["tasks"]:
        for c in task["comparisons"]:
            counts["tests"] += 1
            case = ET.SubElement(suite, "testcase", classname=f"v41val.{task['task']}",
                                 name=c["variant"], time="0")
            kind, message = _outcome(c, mode)
            detail = rows.what_changed({"tasks": [task]}, c["variant"])
            if kind is not None:
                node = ET.SubElement(case, kind, message=message)
                if kind != "skipped":
                    node.set("type", c["status"])
                node.text = detail
                counts[{"failure": "failures", "error": "errors", "skipped": "skipped"}[kind]] += 1
            out = ET.SubElement(case, "system-out")
            out.text = f"{message}\n{detail}\nmcnemar p {fmt.pvalue(c.get('mcnemar_p'))}"
            rested = gate_table.decided_on(c)
            if rested:
                out.text += f"\ngate: {rested}"
            for caveat in doc.get("caveats") or []:
                out.text += f"\ncaveat: {caveat}"
    for key, value in counts.items():
        suite.set(key, str(value))
    root = ET.Element("testsuites", name="v41val", **{k: str(v) for k, v in counts.items()})
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
