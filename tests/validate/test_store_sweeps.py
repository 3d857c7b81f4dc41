"""The speed_sweeps table: a version-1 store (written before the table existed) opens,
is upgraded in place with its rows intact, and takes sweeps; put/get/replace."""

from __future__ import annotations

import sqlite3

from tasks.request import Generation, GenerationParams, Request
from validate.engines.base import Timings
from validate.store import SCHEMA_VERSION, PlannedRequest, ResponseRecord, ResultsStore
from validate.store.schema import DDL, SPEED_SWEEPS_DDL


def _request() -> PlannedRequest:
    req = Request("gsm8k", "gsm8k-test-0000", "generate", prompt="2+2?",
                  gen=GenerationParams(max_gen_toks=4))
    return PlannedRequest(variant="a", repeat=0, request=req)


def _version_one_store(path) -> None:
    """A store as v41val wrote it before schema 2: the v1 tables only, version 1."""
    assert SPEED_SWEEPS_DDL in DDL
    with ResultsStore.open(path) as store:
        run = store.begin_run("h" * 64, plan_name="old", identity={"git": None})
        store.put_response(run, _request(), ResponseRecord(
            response=Generation(text="4", finish_reason="stop"),
            timings=Timings(started_at_s=1.0, e2e_s=0.5, ttft_s=0.1, n_output_tokens=3)))
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE speed_sweeps")
    conn.execute("DROP TABLE fidelity")
    for table in ("engagement", "engagement_counters", "speed_rounds",  # version 4's
                  "variant_servers"):  # version 5's
        conn.execute(f"DROP TABLE {table}")
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()


def test_a_version_one_store_is_upgraded_and_keeps_its_rows(tmp_path):
    db = tmp_path / "results.sqlite"
    _version_one_store(db)
    assert SCHEMA_VERSION == 5
    with ResultsStore.open(db) as store:
        [stored] = store.responses("h" * 64)
        assert stored.record.response.text == "4" and stored.record.timings.ttft_s == 0.1
        assert store.sweeps("h" * 64) == []
        run = store.runs()[0]
        store.put_sweep(run, "a", settings={"x": 1}, sweep={"levels": []}, headline={"v": 2.5})
    conn = sqlite3.connect(db)
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    assert meta["schema_version"] == str(SCHEMA_VERSION) == "5"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 5
    assert conn.execute("SELECT count(*) FROM speed_sweeps").fetchone()[0] == 1
    conn.close()


def test_sweeps_round_trip_and_are_replaced_per_variant(tmp_path):
    with ResultsStore.open(tmp_path / "results.sqlite") as store:
        run = store.begin_run("p" * 64, plan_name="p", identity={"git": None})
        store.put_sweep(run, "base", settings={"levels": [1, 2]}, sweep={"t": [0.1, 0.25]},
                        headline={"tok": 47.5})
        store.put_sweep(run, "cand", settings={"levels": [1, 2]}, sweep={"t": [0.3]},
                        headline={"tok": 50.0}, comparison={"ratio": 1.0526315789473684})
        base = store.sweep("p" * 64, "base")
        assert (base.settings, base.sweep, base.headline, base.comparison, base.run_id) == (
            {"levels": [1, 2]}, {"t": [0.1, 0.25]}, {"tok": 47.5}, None, run.run_id)
        assert store.sweep("p" * 64, "cand").comparison == {"ratio": 1.0526315789473684}
        store.put_sweep(run, "base", settings={"levels": [1]}, sweep={}, headline={"tok": 1.0})
        assert [s.variant for s in store.sweeps("p" * 64)] == ["base", "cand"]
        assert store.sweep("p" * 64, "base").settings == {"levels": [1]}
        assert store.sweep("other", "base") is None
