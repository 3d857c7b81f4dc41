"""The A/A noise floor (plan ``aa = true``) on the builtin engine: the baseline runs a
second time with its requests in another order (other batch neighbours, the same
concurrency); in batch-invariant mode that copy answers token for token like the
baseline, so its flip rate and KL are 0, and every A/B row shows both beside its own."""

from __future__ import annotations

import pytest

from validate.analysis import analyze_run
from validate.plan import load_plan
from validate.runner import run_plan
from validate.runner.requests import load_tasks, planned_requests
from validate.runner.run import aa_order
from validate.store import ResultsStore

pytestmark = pytest.mark.slow  # the trained testbed on CPU, three variants

TASK = "testbed_lookup"

PLAN = f"""\
name = "aa"
baseline = "exact"
aa = true
concurrency = 4
fidelity_prompts = 2
fidelity_tokens = 4

[engine]
kind = "builtin"
preset = "testbed"

[variants.exact]
swa = "exact"
batch_invariant = {{invariant}}
[variants.bounded]
swa = "bounded"
batch_invariant = {{invariant}}

[[tasks]]
name = "{TASK}"
limit = 8
max_gen_toks = 8
"""


def _run(tmp_path, invariant: bool):
    path = tmp_path / "plan.toml"
    path.write_text(PLAN.format(invariant=str(invariant).lower()))
    plan = load_plan(path)
    assert plan.aa_variant == "exact+aa" and plan.variant_names[-1] == "exact+aa"
    with ResultsStore.open(tmp_path / "results.sqlite") as store:
        run_plan(plan, store)
        outputs = {v: {s.key.item_id: s.record.engine["output_token_ids"]
                       for s in store.responses(plan.hash, v, TASK)}
                   for v in ("exact", "exact+aa")}
        analysis = analyze_run(store)
    return plan, outputs, analysis


def test_batch_invariant_aa_has_no_flip_and_no_kl(tmp_path):
    plan, outputs, analysis = _run(tmp_path, invariant=True)
    planned = planned_requests(plan, load_tasks(plan), "exact+aa")
    assert [p.key for p in aa_order(planned, plan.seed)] != [p.key for p in planned]
    assert outputs["exact"] == outputs["exact+aa"] and len(outputs["exact"]) == 8
    floor = analysis.comparison("bounded", TASK).noise_floor
    assert floor.aa_variant == "exact+aa" and floor.n_rows == 8
    assert (floor.aa_flips, floor.aa_flip_rate, floor.aa_kl_mean) == (0, 0.0, 0.0)
    assert floor.excess.aa_only == 0 and floor.excess.ab_only == floor.ab_flips
    # the A/A copy is shown but never gated
    assert "exact+aa" not in analysis.variant_decisions
    assert analysis.comparison("exact+aa", TASK).noise_floor is None
    _check_report(analysis, floor)


def _check_report(analysis, floor):
    """The document carries the floor and engagement and follows the schema; every
    renderer prints the A/A row beside the A/B one."""
    import json
    from pathlib import Path

    import jsonschema

    from reports.document import report_document
    from reports.markdown import render_markdown
    from reports.terminal import terminal_text

    doc = report_document(analysis)
    schema = json.loads((Path(__file__).parents[2] / "reports" / "schema" /
                         "report.schema.json").read_text())
    jsonschema.validate(doc, schema)
    [bounded] = [c for c in doc["tasks"][0]["comparisons"] if c["variant"] == "bounded"]
    assert bounded["noise_floor"]["aa_flips"] == floor.aa_flips
    assert {b["by"] for b in bounded["engagement"]["breakdown"]} >= {"prompt_tokens"}
    row = (f"| {TASK} | bounded | {floor.aa_flips} ({100 * floor.aa_flip_rate:.1f} %) | "
           f"{floor.ab_flips} ({100 * floor.ab_flip_rate:.1f} %) |")
    assert row in render_markdown(doc)
    assert "A/A noise floor" in terminal_text(doc, width=200)


def test_without_batch_invariance_the_measured_rate_is_reported(tmp_path):
    plan, outputs, analysis = _run(tmp_path, invariant=False)
    floor = analysis.comparison("bounded", TASK).noise_floor
    base = analysis.comparison("exact+aa", TASK).comparison.outcomes
    flips = int((base.a != base.b).sum())  # score flips between the two baseline runs
    assert floor.aa_flips == flips and floor.aa_flip_rate == pytest.approx(flips / 8)
    assert floor.aa_kl_mean is not None and floor.aa_kl_mean >= 0.0
    assert 0.0 <= floor.excess.p <= 1.0
