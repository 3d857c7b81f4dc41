"""Reading and writing the engagement ledger (schema version 4, ``validate.store.schema``).

The ledger is written in the same transaction as its response, so a stored response
and what its optimization did cannot part. Reading turns NULL back into None (unknown);
a response with no ledger row is simply absent from the map, which callers read as
unknown for every field.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence

from validate.engines.engagement import Engagement, ServerCounters
from validate.store.codec import dumps


def put(conn: sqlite3.Connection, request_id: int, ledger: Engagement) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO engagement (request_id, source, prompt_tokens, hit_tokens,"
        " replayed_tokens, trimmed, trim_layer, trimmed_rows, kernels_json)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (request_id, ledger.source, ledger.prompt_tokens, ledger.hit_tokens,
         ledger.replayed_tokens, None if ledger.trimmed is None else int(ledger.trimmed),
         ledger.trim_layer, ledger.trimmed_rows,
         None if ledger.kernels is None else dumps(dict(ledger.kernels))))


def by_item(conn: sqlite3.Connection, plan_hash: str, variant: str,
            task: str) -> dict[tuple[str, int], Engagement]:
    """(item_id, repeat) -> its ledger, for the responses of one (variant, task) that
    have one."""
    out = {}
    for row in conn.execute(
            "SELECT r.item_id, r.repeat, e.source, e.prompt_tokens, e.hit_tokens,"
            " e.replayed_tokens, e.trimmed, e.trim_layer, e.trimmed_rows, e.kernels_json"
            " FROM engagement e JOIN requests r USING (request_id)"
            " WHERE r.plan_hash = ? AND r.variant = ? AND r.task = ?",
            (plan_hash, variant, task)):
        item_id, repeat, source, prompt, hit, replayed, trimmed, layer, rows, kernels = row
        out[(item_id, int(repeat))] = Engagement(
            source=source, prompt_tokens=prompt, hit_tokens=hit, replayed_tokens=replayed,
            trimmed=None if trimmed is None else bool(trimmed), trim_layer=layer,
            trimmed_rows=rows, kernels=None if kernels is None else json.loads(kernels))
    return out


def put_counters(conn: sqlite3.Connection, plan_hash: str, variant: str, run_id: int,
                 counters: ServerCounters) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO engagement_counters (plan_hash, variant, run_id, source,"
        " before_json, after_json, log_lines_json, stored_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (plan_hash, variant, run_id, counters.source, dumps(dict(counters.before)),
         dumps(dict(counters.after)), dumps(list(counters.log_lines)), time.time()))


def counters(conn: sqlite3.Connection, plan_hash: str,
             variant: str) -> Sequence[ServerCounters]:
    """Every stored quality pass of one variant, oldest first."""
    return [ServerCounters(source=source, before=json.loads(before), after=json.loads(after),
                           log_lines=tuple(json.loads(lines)))
            for source, before, after, lines in conn.execute(
                "SELECT source, before_json, after_json, log_lines_json FROM"
                " engagement_counters WHERE plan_hash = ? AND variant = ? ORDER BY run_id",
                (plan_hash, variant))]
