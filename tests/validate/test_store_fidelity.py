"""Fidelity records live in the results store (schema 3): copying the store keeps them,
a store of the previous version is upgraded in place and the fidelity JSON file the
previous version wrote beside it is imported; a re-keyed legacy plan keeps them."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from validate.analysis import analyze_run
from validate.plan import load_plan
from validate.runner.run import adopt_legacy
from validate.store import SCHEMA_VERSION, ResultsStore

FIXTURES = Path(__file__).parent / "fixtures"
LEGACY_HASH = "35be0d8b21fe65fe08d5fa15a80dc9ae5fb459aca9664d5a4376ca9d5d97fd51"
RECORDS = [{"item_id": "gsm8k-test-0000", "kl": [0.0, 0.5], "top1": [1.0, 0.0],
            "first_divergence": 1}]


def _legacy_workspace(tmp_path: Path) -> Path:
    """The v0.1 fixture store (schema 2) with a fidelity file as v0.1 wrote it."""
    store = tmp_path / "ws" / "results.sqlite"
    store.parent.mkdir()
    shutil.copy(FIXTURES / "legacy-store-v0.1.sqlite", store)
    (store.parent / "fidelity").mkdir()
    (store.parent / "fidelity" / f"{LEGACY_HASH}.json").write_text(json.dumps({
        "settings": {"prompts": 16, "tokens": 32}, "method": "exact full-vocab",
        "records": {"bounded": {"gsm8k": RECORDS}}}))
    return store


def test_the_legacy_fidelity_file_is_imported_and_travels_with_the_store(tmp_path):
    path = _legacy_workspace(tmp_path)
    with ResultsStore.open(path) as store:
        assert store.fidelity_document(LEGACY_HASH)["records"]["bounded"]["gsm8k"] == RECORDS
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 5
    conn.close()
    copied = tmp_path / "elsewhere" / "results.sqlite"  # the store alone, no JSON beside it
    copied.parent.mkdir()
    shutil.copy(path, copied)
    with ResultsStore.open(copied) as store:
        analysis = analyze_run(store, LEGACY_HASH)
    fid = analysis.summary("bounded", "gsm8k").fidelity
    assert fid is not None and fid.n_prompts == 1 and fid.n_tokens == 2


def test_fidelity_is_rekeyed_with_a_legacy_plan(tmp_path):
    path = _legacy_workspace(tmp_path)
    plan = load_plan(FIXTURES / "legacy-plan.toml")
    with ResultsStore.open(path) as store:
        assert adopt_legacy(plan, store) == 1
        assert store.fidelity_document(plan.hash)["records"]["bounded"]["gsm8k"] == RECORDS
    with ResultsStore.open(path) as store:  # the file beside it is not imported again
        assert not store.runs(LEGACY_HASH)
        rows = store._read(lambda c: c.execute("SELECT DISTINCT plan_hash FROM fidelity")
                           .fetchall())
    assert rows == [(plan.hash,)]


def test_new_settings_replace_the_old_records(tmp_path):
    with ResultsStore.open(tmp_path / "results.sqlite") as store:
        store.put_fidelity("p", "a", "t", settings={"prompts": 1}, method="m", records=RECORDS)
        store.put_fidelity("p", "b", "t", settings={"prompts": 2}, method="m", records=RECORDS)
        doc = store.fidelity_document("p")
    assert doc["settings"] == {"prompts": 2} and list(doc["records"]) == ["b"]
