"""``v41val demo`` through the real CLI at a reduced size: it finishes with a report
(exit 0) whose per-variant accuracies equal a recompute from the store, states the
GSM8K floor plainly, leads with fidelity numbers, and a rerun resumes from the store."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys

import pytest

import tasks

CLI = "from validate.cli import main; main()"
ITEMS = 8  # 6 GSM8K + 2 GPQA (the split of validate.demo.plan.ItemSplit)


def _demo(workspace, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", CLI, "demo", "--items", str(ITEMS),
                           "--workspace", str(workspace), *extra],
                          capture_output=True, text=True, env=env, timeout=900, check=False)


def _stored_accuracy(store, task: str, variant: str, metric: str) -> float:
    """Mean of the stored scores, read with plain SQL (not through the analysis code)."""
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT s.score FROM requests r JOIN scores s USING (request_id) "
                          "WHERE r.task = ? AND r.variant = ? AND s.filter = ?",
                          (task, variant, metric)).fetchall()
    assert rows
    return sum(score for (score,) in rows) / len(rows)


def _gpqa_accuracy_from_loglikelihoods(store, variant: str) -> float:
    """GPQA acc recomputed from the stored loglikelihoods and the gold choice: correct
    when the gold continuation has the largest loglikelihood (independent of scoring)."""
    task = tasks.get("gpqa_diamond_zeroshot")
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT r.item_id, p.response_json FROM requests r JOIN responses p "
                          "USING (request_id) WHERE r.task = ? AND r.variant = ?",
                          ("gpqa_diamond_zeroshot", variant)).fetchall()
    assert rows
    correct = 0
    for item_id, response_json in rows:
        scores = json.loads(response_json)["values"]
        item = task.item(item_id)
        choices = [c.strip() for c in task.render(item).continuations]  # "(A)".."(D)"
        gold_index = choices.index(item.target.strip())
        best = max(range(len(scores)), key=lambda k: scores[k])
        correct += best == gold_index
    return correct / len(rows)


@pytest.mark.slow
def test_demo_finishes_with_a_report_that_matches_the_store(tmp_path):
    first = _demo(tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    text = first.stdout
    assert "The model is at the floor of gsm8k_cot_zeroshot" in text
    assert "Read the fidelity metrics first" in text
    lead, _, rest = text.partition("v41val run report")
    assert "Fidelity vs the baseline" in lead and rest, "fidelity must come before the report"
    for variant in ("encoder_replay", "decoder_trim", "both_bounded"):
        assert variant in lead
    if "not available on this device" not in text:
        assert "fused_" in text  # a CUDA machine runs the fused variants

    store = tmp_path / "results.sqlite"
    with sqlite3.connect(store) as db:
        stored_before = db.execute("SELECT count(*) FROM responses").fetchone()[0]

    second = _demo(tmp_path, "--json")  # same plan, same workspace: resumes
    assert second.returncode == 0, second.stderr[-3000:]
    doc = json.loads(second.stdout)
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT count(*) FROM responses").fetchone()[0] == stored_before
    assert "gsm8k_cot_zeroshot" in doc["floor_tasks"]
    assert doc["demo"]["variants"][0] == "reference"

    by_task = {t["task"]: t for t in doc["tasks"]}
    assert set(by_task) == {"gsm8k_cot_zeroshot", "gpqa_diamond_zeroshot"}
    for name, task in by_task.items():
        assert {v["variant"] for v in task["variants"]} == set(doc["demo"]["variants"])
        for v in task["variants"]:
            assert v["n_items"] == (6 if name.startswith("gsm8k") else 2)
            assert v["accuracy"] == pytest.approx(
                _stored_accuracy(store, name, v["variant"], task["metric"]), abs=1e-12)
            if name.startswith("gpqa"):
                assert v["accuracy"] == pytest.approx(
                    _gpqa_accuracy_from_loglikelihoods(store, v["variant"]), abs=1e-12)
            if v["is_baseline"]:
                continue
            f = v["fidelity"]
            assert f is not None and f["n_tokens"] > 0
            assert f["kl_mean"] >= 0 and math.isfinite(f["kl_mean"])
            assert 0.0 <= f["top1_agreement"] <= 1.0
        assert len(task["comparisons"]) == len(task["variants"]) - 1


def test_demo_rejects_bad_items_with_exit_2(tmp_path, capsys):
    from validate.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--items", "3", "--workspace", str(tmp_path)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "v41val: error: --items: expected >= 4 (at least 2 per task), got 3")
    assert not (tmp_path / "results.sqlite").exists()


def test_item_split_gives_gpqa_a_tenth_and_at_least_two():
    from validate.demo.plan import ItemSplit

    assert ItemSplit.of(200) == ItemSplit(gsm8k=180, gpqa=20)
    assert ItemSplit.of(8) == ItemSplit(gsm8k=6, gpqa=2)
    assert ItemSplit.of(4) == ItemSplit(gsm8k=2, gpqa=2)


def test_demo_plan_records_its_budget_and_picks_the_shortest_prompts():
    from validate.demo.plan import demo_plan

    plan = demo_plan(items=20)
    assert plan.variant_names == ("reference", "encoder_replay", "decoder_trim", "both_bounded")
    options = {v.name: dict(v.options) for v in plan.variants}
    assert options["reference"]["swa"] == "exact" and options["reference"]["kernels"] == "reference"
    assert options["encoder_replay"]["encoder_replay"] and not options["encoder_replay"]["decoder_trim"]
    assert options["decoder_trim"]["decoder_trim"] and not options["decoder_trim"]["encoder_replay"]
    assert options["both_bounded"]["kernels"] == "reference"  # no fused op pretends to run
    ident = plan.identity()
    assert ident["engine"]["overrides"]["sliding_window"] == 32
    gsm8k, gpqa = plan.tasks
    assert gsm8k.max_gen_toks == 8 and len(gsm8k.items) == 18 and len(gpqa.items) == 2
    for spec in plan.tasks:  # every chosen prompt is no longer than any prompt left out
        task = tasks.get(spec.name)
        lengths = {item.id: len(task.render(item).prompt) for item in task.items()}
        chosen = set(spec.items)
        assert max(lengths[i] for i in chosen) <= min(v for k, v in lengths.items()
                                                      if k not in chosen)


def test_demo_plan_with_fused_ops_adds_one_variant_per_op_and_all_on():
    from validate.demo.plan import demo_plan

    plan = demo_plan(items=8, fused_ops=("gate", "mhc"))
    assert plan.variant_names == ("reference", "encoder_replay", "decoder_trim", "fused_gate",
                                  "fused_mhc", "all_on")
    assert plan.variant("all_on").options["kernels"] == "all"


def test_fused_variants_are_not_offered_on_a_cpu():
    from validate.demo.fused import fused_availability

    found = fused_availability("cpu")
    assert found.ops == ()
    assert "fused_gate" in found.skipped and "not available on this device" in found.reason
