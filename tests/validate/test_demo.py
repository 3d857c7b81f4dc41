"""``v41val demo`` through the real CLI at a reduced size: it finishes with a report
(exit 0) whose per-variant accuracies equal a recompute from the store, names the tasks
whose baseline sits at the floor exactly when the stored scores say so, leads with
fidelity numbers, and a rerun resumes from the store."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from validate.demo.plan import DEMO_TASKS

CLI = "from v41val.cli import main; main()"
ITEMS = 6  # 2 per testbed task (the split of validate.demo.plan.ItemSplit)


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


@pytest.mark.slow
def test_demo_finishes_with_a_report_that_matches_the_store(tmp_path):
    first = _demo(tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    text = first.stdout
    assert "the trained V4.1 'testbed'" in text
    lead, _, rest = text.partition("v41val run report")
    assert "Fidelity vs the baseline" in lead and rest, "fidelity must come before the report"
    for variant in ("encoder_replay", "decoder_trim", "both_bounded"):
        assert variant in lead
    assert "speed: 8 interleaved rounds" in " ".join(lead.split())
    if "not available on this device" not in text:
        assert "fused_" in text  # a CUDA machine runs the fused variants

    for fmt, name in (("html", "report.html"), ("md", "report.md")):
        assert f"{fmt} report: {tmp_path / name}" in text.replace("\n", "")
    assert "What this run shows:" in text

    store = tmp_path / "results.sqlite"
    with sqlite3.connect(store) as db:
        stored_before = db.execute("SELECT count(*) FROM responses").fetchone()[0]

    second = _demo(tmp_path, "--json")  # same plan, same workspace: resumes
    assert second.returncode == 0, second.stderr[-3000:]
    doc = json.loads(second.stdout)
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT count(*) FROM responses").fetchone()[0] == stored_before
    assert doc["demo"]["variants"][0] == "reference"
    rounds = {x["variant"]: x for x in doc["interleaved"]}
    assert set(rounds) == {"encoder_replay", "decoder_trim", "both_bounded"}
    assert all(x["rounds"] == 8 and x["speedups"]["ttft"]["n"] == 8 for x in rounds.values())
    assert doc["headline"] is None

    by_task = {t["task"]: t for t in doc["tasks"]}
    assert set(by_task) == set(DEMO_TASKS)
    for name, task in by_task.items():
        assert {v["variant"] for v in task["variants"]} == set(doc["demo"]["variants"])
        base = _stored_accuracy(store, name, "reference", task["metric"])
        # generative tasks: chance is 0, the floor is within 5 points of it
        assert (name in doc["floor_tasks"]) == (base < 0.05)
        assert (f"The model is at the floor of {name}" in text) == (base < 0.05)
        for v in task["variants"]:
            assert v["n_items"] == 2
            assert v["accuracy"] == pytest.approx(
                _stored_accuracy(store, name, v["variant"], task["metric"]), abs=1e-12)
            if v["is_baseline"]:
                continue
            f = v["fidelity"]
            assert f is not None and f["n_tokens"] > 0
            assert f["kl_mean"] >= 0 and math.isfinite(f["kl_mean"])
            assert 0.0 <= f["top1_agreement"] <= 1.0
        assert len(task["comparisons"]) == len(task["variants"]) - 1
    _check_reports_and_sentences(doc, store)


def _stored_flips(store, task: str, variant: str, metric: str) -> tuple[int, int]:
    """(right to wrong, wrong to right) of ``variant`` vs the baseline, by plain SQL."""
    def scores(v):
        with sqlite3.connect(store) as db:
            return dict(db.execute(
                "SELECT r.item_id, s.score FROM requests r JOIN scores s USING (request_id) "
                "WHERE r.task = ? AND r.variant = ? AND s.filter = ?", (task, v, metric)))
    a, b = scores("reference"), scores(variant)
    return (sum(a[i] == 1 and b[i] == 0 for i in a), sum(a[i] == 0 and b[i] == 1 for i in a))


def _check_reports_and_sentences(doc: dict, store) -> None:
    """The HTML and Markdown reports exist in the workspace with this run's numbers and
    sentences; one sentence per optimization, as recomputed from the document, whose
    flip counts equal the store's."""
    import html

    from validate.demo.conclusions import optimization_sentences

    sentences = doc["demo"]["conclusions"]
    assert sentences == optimization_sentences(doc)
    candidates = [v for v in doc["demo"]["variants"] if v != "reference"]
    assert [s.split(" ", 1)[0] for s in sentences] == candidates
    paths = doc["demo"]["reports"]
    assert set(paths) == {"html", "md"}
    md = Path(paths["md"]).read_text(encoding="utf-8")
    page = Path(paths["html"]).read_text(encoding="utf-8")
    assert f"decision **{doc['decision']}**" in md
    assert doc["run"]["plan_name"] in page and doc["decision"] in page
    for sentence in sentences:
        assert sentence in md and html.escape(sentence) in page
    for variant, sentence in zip(candidates, sentences, strict=True):
        counted = [(t["task"], t["metric"]) for t in doc["tasks"] if not t["floor"]]
        if not counted:
            assert "at the floor of every task" in sentence
            continue
        b = c = n = 0
        for task, metric in counted:
            flips = _stored_flips(store, task, variant, metric)
            b, c, n = b + flips[0], c + flips[1], n + ITEMS // len(DEMO_TASKS)
        assert f"{b + c} of {n} answers changed ({b} right to wrong, {c} wrong to right" in sentence


def test_demo_rejects_bad_items_with_exit_2(tmp_path, capsys):
    from v41val.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--items", "5", "--workspace", str(tmp_path)])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "v41val: error: --items: expected >= 6 (at least 2 per task), got 5")
    assert not (tmp_path / "results.sqlite").exists()


def test_item_split_is_even_with_the_remainder_first():
    from validate.demo.plan import ItemSplit

    assert ItemSplit.of(90).per_task == (30, 30, 30)
    assert ItemSplit.of(10).per_task == (4, 3, 3)
    assert ItemSplit.of(6).per_task == (2, 2, 2)


def test_demo_plan_runs_the_trained_testbed_on_its_tasks():
    from validate.demo.plan import demo_plan

    plan = demo_plan(items=20)
    assert plan.variant_names == ("reference", "encoder_replay", "decoder_trim", "both_bounded")
    options = {v.name: v.options.to_dict() for v in plan.variants}
    assert options["reference"]["swa"] == "exact" and options["reference"]["kernels"] == "reference"
    assert options["encoder_replay"]["encoder_replay"] and not options["encoder_replay"]["decoder_trim"]
    assert options["decoder_trim"]["decoder_trim"] and not options["decoder_trim"]["encoder_replay"]
    assert options["both_bounded"]["kernels"] == "reference"  # no fused op pretends to run
    ident = plan.identity()
    assert ident["engine"]["preset"] == "testbed"
    assert [(t.name, t.limit) for t in plan.tasks] == list(zip(DEMO_TASKS, (7, 7, 6), strict=True))
    # speed in interleaved rounds alone (no one-window-per-variant sweep)
    assert plan.speed.rounds == 8 and plan.speed.sweep_levels == ()


def test_demo_plan_with_fused_ops_adds_one_variant_per_op_and_all_on():
    from validate.demo.plan import demo_plan

    plan = demo_plan(items=8, fused_ops=("gate", "mhc"))
    assert plan.variant_names == ("reference", "encoder_replay", "decoder_trim", "fused_gate",
                                  "fused_mhc", "all_on")
    assert plan.variant("all_on").options.kernels == "all"


def test_fused_variants_are_not_offered_on_a_cpu():
    from validate.plan.fused import fused_availability

    found = fused_availability("cpu")
    assert found.ops == ()
    assert "fused_gate" in found.skipped and "not available on this device" in found.reason
