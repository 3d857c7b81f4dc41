"""GPQA text never reaches the results store: the runner marks GPQA requests
``store_text=False`` and the store keeps only the prompt's hash, parameters and ids."""

from __future__ import annotations

import re
import sqlite3

import tasks
from tasks.request import Loglikelihoods
from validate.plan.load import parse_plan
from validate.plan.schema import Plan
from validate.runner.requests import load_tasks, planned_requests
from validate.store import PlannedRequest, ResponseRecord, ResultsStore
from validate.store.codec import WITHHELD_TEXT


def _plan_for(task_name: str, limit: int) -> Plan:
    return parse_plan({
        "name": "withheld",
        "baseline": "a",
        "engine": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"},
        "variants": {"a": {}},
        "tasks": [{"name": task_name, "limit": limit}],
    }, source="<test>")


def _fragment(text: str) -> bytes:
    """The longest run of plain characters: survives JSON escaping unchanged."""
    return max(re.findall(r"[A-Za-z0-9 ,]+", text), key=len).encode()


def _file_bytes(directory) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file())


def test_text_scan_finds_stored_text(tmp_path):
    """Control: the byte scan does see GPQA text when a request is stored with it."""
    task = tasks.get("gpqa_diamond_zeroshot")
    item = task.items()[0]
    with ResultsStore.open(tmp_path / "r.sqlite") as store:
        run = store.begin_run(plan_hash="c" * 16, plan_name="control", plan={})
        store.pending(run, [PlannedRequest("a", 0, task.render(item), store_text=True)])
    assert _fragment(item.question) in _file_bytes(tmp_path)


def test_gpqa_requests_are_stored_without_text(tmp_path):
    plan = _plan_for("gpqa_diamond_zeroshot", 5)
    loaded = load_tasks(plan)
    planned = planned_requests(plan, loaded, "a")
    assert planned and all(not p.store_text for p in planned)
    path = tmp_path / "results.sqlite"
    with ResultsStore.open(path) as store:
        run = store.begin_run(plan_hash="p" * 16, plan_name="withheld", plan={})
        store.pending(run, planned)
        store.put_response(run, planned[0], ResponseRecord(
            response=Loglikelihoods(values=(-1.0, -2.0, -3.0, -4.0))))
        stored = store.response(run.plan_hash, planned[0].key)
    assert stored.request.prompt == WITHHELD_TEXT
    task = tasks.get("gpqa_diamond_zeroshot")
    raw = _file_bytes(tmp_path)
    for item in task.items()[:5]:
        # The question and each choice of every planned item are absent from the files.
        assert _fragment(item.question) not in raw, f"question text of {item.id} stored"
        for choice in item.choices:
            fragment = _fragment(choice)
            if len(fragment) >= 12:
                assert fragment not in raw, f"choice text of {item.id} stored"
    con = sqlite3.connect(path)
    shas = {row[0] for row in con.execute("SELECT prompt_sha256 FROM requests")}
    con.close()
    assert {p.request.prompt_sha256 for p in planned} == shas


def test_gsm8k_requests_keep_their_text(tmp_path):
    plan = _plan_for("gsm8k_cot_zeroshot", 2)
    planned = planned_requests(plan, load_tasks(plan), "a")
    assert all(p.store_text for p in planned)
    with ResultsStore.open(tmp_path / "r.sqlite") as store:
        run = store.begin_run(plan_hash="q" * 16, plan_name="withheld", plan={})
        store.pending(run, planned)
        store.put_response(run, planned[0], ResponseRecord(
            response=Loglikelihoods(values=(-1.0,))))
        stored = store.response(run.plan_hash, planned[0].key)
    assert stored.request.prompt == planned[0].request.prompt
