"""The JSON report: the report document (``reports.document``) as one JSON file, its
JSON Schema (``reports/schema/report.schema.json``, versioned by ``schema_version``)
and a recomputation of every verdict from the file alone.

``recompute_verdicts`` is the proof that the file carries what a reader needs: it
rebuilds each gated (task, variant)'s evidence from the stored 2x2 table and n (or from
the per-row outcomes when rows repeat), takes margin, alpha, correction and mode from
the file, and runs the gate's family decision again. A consumer that trusts nothing but
the JSON gets the same verdicts the run reported.
"""

from __future__ import annotations

import json
from importlib import resources

import numpy as np

from reports.errors import ReportInputError
from validate.gate.evidence import ScoreEvidence, evidence_for
from validate.gate.policy import GatePolicy, TaskPolicy
from validate.gate.verdict import decide_family
from validate.stats.outcomes import PairedOutcomes


def load_schema() -> dict:
    text = (resources.files("reports") / "schema" / "report.schema.json").read_text("utf-8")
    return json.loads(text)


def render_json(doc: dict) -> str:
    """Strict JSON (no NaN: the document already maps non-finite numbers to null)."""
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def validate_document(doc: dict) -> None:
    """Check ``doc`` against the schema; ``ReportInputError`` naming the first problem.
    Needs ``jsonschema`` (a dev dependency)."""
    try:
        import jsonschema
    except ImportError as exc:  # pragma: no cover - dev dependency
        raise ReportInputError("validating a report needs the jsonschema package") from exc
    validator = jsonschema.Draft202012Validator(load_schema())
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.path) or "<root>"
        raise ReportInputError(f"report document invalid at {where}: {first.message}")


def _evidence(comparison: dict):
    """The gate's evidence rebuilt from the file: 2x2 table + n, or per-row outcomes."""
    if not comparison.get("repeated") and comparison.get("table"):
        t = comparison["table"]
        return ScoreEvidence(b=int(t["b"]), c=int(t["c"]), n=int(t["n"]))
    o = comparison.get("outcomes")
    if not o:
        raise ReportInputError(
            f"{comparison['variant']}: repeated rows need the per-row outcomes to recompute")
    paired = PairedOutcomes.from_arrays(
        np.asarray(o["baseline"]), np.asarray(o["candidate"]), clusters=o["item_ids"])
    return evidence_for(paired)


def recompute_verdicts(doc: dict) -> dict[tuple[str, str], str]:
    """{(task, variant): verdict word} for every gated, tested comparison in ``doc``,
    decided again as one family from the file's numbers only."""
    policy = doc.get("policy")
    if policy is None:
        return {}
    tested, keys = [], []
    for task in doc["tasks"]:
        for c in task["comparisons"]:
            v = c.get("verdict")
            if v is None or v["verdict"] == "INVALID":
                continue
            tp = TaskPolicy(task=f"{task['task']}::{c['variant']}", margin=v["margin"],
                            tier=v["tier"], metric=task["metric"])
            tested.append((tp, task["metric"], _evidence(c)))
            keys.append((task["task"], c["variant"]))
    if not tested:
        return {}
    gate = GatePolicy(tasks=tuple(tp for tp, _, _ in tested), alpha=policy["alpha"],
                      power=policy.get("power") or 0.8, correction=policy["correction"],
                      mode=policy["mode"], equivalence=bool(policy.get("equivalence")))
    verdicts = decide_family(gate, tested)
    return {k: v.verdict for k, v in zip(keys, verdicts, strict=True)}
