"""The engagement ledger in the results store: NULL stays unknown both ways, the row is
committed with its response, and a store written before the ledger existed (schema 1,
the v0.1 fixture) opens, is upgraded to schema 4 and reads every ledger as unknown."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from tasks.request import Generation, GenerationParams, Request
from validate.engines.engagement import Engagement, ServerCounters
from validate.store import (
    SCHEMA_VERSION,
    PlannedRequest,
    ResponseRecord,
    ResultsStore,
)

FIXTURES = Path(__file__).parent / "fixtures"
LEGACY_HASH = "35be0d8b21fe65fe08d5fa15a80dc9ae5fb459aca9664d5a4376ca9d5d97fd51"  # its plan
GEN = GenerationParams(max_gen_toks=8)


def _planned(i: int, variant: str = "v") -> PlannedRequest:
    return PlannedRequest(variant, 0, Request(task="t", item_id=f"i{i}", kind="generate",
                                              prompt=f"q{i}", gen=GEN))


def test_known_values_round_trip_and_unknown_stays_none(tmp_path):
    known = Engagement(source="runtime", prompt_tokens=300, hit_tokens=256,
                       replayed_tokens=32, trimmed=True, trim_layer=2, trimmed_rows=12,
                       kernels={"gate": "reference"})
    zero = Engagement(source="runtime", prompt_tokens=40, hit_tokens=0, replayed_tokens=0,
                      trimmed=False, trimmed_rows=0, kernels={})
    unknown = Engagement(source="usage", prompt_tokens=40)
    with ResultsStore.open(tmp_path / "r.sqlite") as store:
        run = store.begin_run("p" * 16, identity={})
        for i, ledger in enumerate((known, zero, unknown, None)):
            store.put_response(run, _planned(i), ResponseRecord(Generation("x"),
                                                                 engagement=ledger))
        got = store.engagement(run.plan_hash, "v", "t")
        assert got == {("i0", 0): known, ("i1", 0): zero, ("i2", 0): unknown}
        assert got[("i2", 0)].hit_tokens is None  # not 0
        # a second writer's copy of the same response is ignored, ledger included
        store.put_response(run, _planned(0), ResponseRecord(Generation("y"), engagement=zero))
        assert store.engagement(run.plan_hash, "v", "t")[("i0", 0)] == known
        counters = ServerCounters("metrics", {"prefix_cache_hits": 5.0}, {
            "prefix_cache_hits": 80.0, "prefix_cache_queries": 90.0}, ("replay is off",))
        store.put_counters(run, "v", counters)
        assert store.counters(run.plan_hash, "v") == [counters]
        assert counters.delta() == {"prefix_cache_hits": 75.0}  # queries: unknown before


def test_a_store_from_before_the_ledger_opens_and_reads_unknown(tmp_path):
    path = tmp_path / "results.sqlite"
    shutil.copy(FIXTURES / "legacy-store-v0.1.sqlite", path)
    with sqlite3.connect(path) as conn:
        old = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        n_old = conn.execute("SELECT count(*) FROM responses").fetchone()[0]
    assert int(old[0]) < 4 and n_old > 0
    with ResultsStore.open(path) as store:
        responses = store.responses(LEGACY_HASH)
        assert len(responses) == n_old
        for variant, task in store.cells(LEGACY_HASH):
            assert store.engagement(LEGACY_HASH, variant, task) == {}
            assert store.counters(LEGACY_HASH, variant) == []
    with sqlite3.connect(path) as conn:
        now = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert int(now[0]) == SCHEMA_VERSION == 5
