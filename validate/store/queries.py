"""Read queries of the results store (each takes an open connection)."""

from __future__ import annotations

import json
import sqlite3

from validate.store.codec import (
    logprobs_from_json,
    request_from_dict,
    response_from_dict,
    timings_from_row,
)
from validate.store.owner import OWNER_KEY, is_gone
from validate.store.records import (
    ItemOutcome,
    OutcomeTable,
    ResponseKey,
    ResponseRecord,
    RunInfo,
    StoredResponse,
    TimingRow,
    VariantInfo,
)


def runs(conn: sqlite3.Connection, plan_hash: str | None) -> list[RunInfo]:
    sql = ("SELECT run_id, plan_hash, plan_name, git_sha, identity_json, seeds_json, started_at,"
           " finished_at, status FROM runs")
    rows = (conn.execute(sql + " ORDER BY run_id") if plan_hash is None else
            conn.execute(sql + " WHERE plan_hash = ? ORDER BY run_id", (plan_hash,)))
    return [_run(r) for r in rows]


def _run(row: tuple) -> RunInfo:
    """A stored run; one still ``running`` whose owning process is gone (killed) reads as
    ``interrupted`` (``validate.store.owner``)."""
    identity = json.loads(row[4])
    owner = identity.pop(OWNER_KEY, None) if isinstance(identity, dict) else None
    status = row[8]
    if status == "running" and is_gone(owner):
        status = "interrupted"
    return RunInfo(row[0], row[1], row[2], row[3], identity, tuple(json.loads(row[5])), row[6],
                   row[7], status, owner)


def variants(conn: sqlite3.Connection, plan_hash: str) -> list[VariantInfo]:
    rows = conn.execute("SELECT name, config_json, is_baseline FROM variants WHERE plan_hash = ?"
                        " ORDER BY name", (plan_hash,))
    return [VariantInfo(name, json.loads(cfg), bool(base)) for name, cfg, base in rows]


def answered_keys(conn: sqlite3.Connection, plan_hash: str) -> set[ResponseKey]:
    rows = conn.execute(
        "SELECT r.variant, r.task, r.item_id, r.repeat FROM requests r JOIN responses s"
        " USING (request_id) WHERE r.plan_hash = ?", (plan_hash,))
    return {ResponseKey(*row) for row in rows}


_RESPONSE_COLUMNS = (
    "r.variant, r.task, r.item_id, r.repeat, r.request_json, s.run_id, s.response_json,"
    " s.raw_json, s.token_logprobs_json, s.attempts, s.engine_json, s.started_at, s.e2e_s,"
    " s.ttft_s, s.itl_json, s.n_prompt_tokens, s.n_output_tokens")


def _stored_response(row: tuple) -> StoredResponse:
    (variant, task, item_id, repeat, request_json, run_id, response_json, raw_json,
     logprobs_json, attempts, engine_json, started_at, e2e, ttft, itl_json, n_prompt,
     n_output) = row
    record = ResponseRecord(
        response=response_from_dict(json.loads(response_json)),
        timings=timings_from_row(started_at, e2e, ttft, itl_json, n_prompt, n_output),
        token_logprobs=logprobs_from_json(logprobs_json),
        raw=None if raw_json is None else json.loads(raw_json),
        attempts=attempts,
        engine=json.loads(engine_json),
    )
    return StoredResponse(ResponseKey(variant, task, item_id, repeat), run_id,
                          request_from_dict(json.loads(request_json)), record)


def response(conn: sqlite3.Connection, plan_hash: str, key: ResponseKey) -> StoredResponse | None:
    row = conn.execute(
        f"SELECT {_RESPONSE_COLUMNS} FROM requests r JOIN responses s USING (request_id)"
        " WHERE r.plan_hash = ? AND r.variant = ? AND r.task = ? AND r.item_id = ?"
        " AND r.repeat = ?", (plan_hash, key.variant, key.task, key.item_id, key.repeat)).fetchone()
    return None if row is None else _stored_response(row)


def _where_variant_task(sql: str, args: list, variant: str | None,
                        task: str | None) -> tuple[str, list]:
    """Narrow a ``... WHERE r.plan_hash = ?`` query to a variant and/or task."""
    if variant is not None:
        sql += " AND r.variant = ?"
        args = [*args, variant]
    if task is not None:
        sql += " AND r.task = ?"
        args = [*args, task]
    return sql, args


def responses(conn: sqlite3.Connection, plan_hash: str, variant: str | None, task: str | None,
              unscored_only: bool = False) -> list[StoredResponse]:
    sql = (f"SELECT {_RESPONSE_COLUMNS} FROM requests r JOIN responses s USING (request_id)"
           " WHERE r.plan_hash = ?")
    sql, args = _where_variant_task(sql, [plan_hash], variant, task)
    if unscored_only:
        sql += " AND NOT EXISTS (SELECT 1 FROM scores c WHERE c.request_id = r.request_id)"
    sql += " ORDER BY r.variant, r.task, r.item_id, r.repeat"
    return [_stored_response(row) for row in conn.execute(sql, args)]


def outcomes(conn: sqlite3.Connection, plan_hash: str, variant: str, task: str) -> OutcomeTable:
    """Every registered request of (variant, task), answered or not, with its scores."""
    base = conn.execute(
        "SELECT r.request_id, r.item_id, r.repeat, r.prompt_sha256, s.request_id IS NOT NULL,"
        " s.finish_reason, s.n_output_tokens, s.output_chars,"
        " (SELECT f.error FROM failures f WHERE f.request_id = r.request_id"
        "  ORDER BY f.failed_at DESC LIMIT 1)"
        " FROM requests r LEFT JOIN responses s USING (request_id)"
        " WHERE r.plan_hash = ? AND r.variant = ? AND r.task = ? ORDER BY r.item_id, r.repeat",
        (plan_hash, variant, task)).fetchall()
    per_request: dict[int, dict[str, tuple[float, bool, str | None]]] = {}
    for request_id, filt, score, invalid, extracted in conn.execute(
            "SELECT c.request_id, c.filter, c.score, c.invalid, c.extracted FROM scores c"
            " JOIN requests r USING (request_id)"
            " WHERE r.plan_hash = ? AND r.variant = ? AND r.task = ?", (plan_hash, variant, task)):
        per_request.setdefault(request_id, {})[filt] = (score, bool(invalid), extracted)
    filters = sorted({f for scores in per_request.values() for f in scores})
    rows = []
    for (request_id, item_id, repeat, sha, responded, finish, n_out, n_chars, failed) in base:
        scores = per_request.get(request_id, {})
        rows.append(ItemOutcome(
            item_id=item_id, repeat=repeat, prompt_sha256=sha, responded=bool(responded),
            finish_reason=finish, n_output_tokens=n_out, output_chars=n_chars,
            scores={f: v[0] for f, v in scores.items()},
            invalid={f: v[1] for f, v in scores.items()},
            extracted={f: v[2] for f, v in scores.items()},
            failed=None if responded else failed))
    return OutcomeTable(plan_hash, variant, task, tuple(filters), tuple(rows))


def timings(conn: sqlite3.Connection, plan_hash: str, variant: str | None,
            task: str | None) -> list[TimingRow]:
    sql = ("SELECT r.variant, r.task, r.item_id, r.repeat, s.run_id, s.started_at, s.ttft_s,"
           " s.tpot_s, s.e2e_s, s.itl_json, s.n_prompt_tokens, s.n_output_tokens, s.engine_json"
           " FROM requests r JOIN responses s USING (request_id) WHERE r.plan_hash = ?")
    sql, args = _where_variant_task(sql, [plan_hash], variant, task)
    sql += " ORDER BY r.variant, r.task, r.item_id, r.repeat"
    return [TimingRow(v, t, i, rep, run_id, started, ttft, tpot, e2e,
                      tuple(json.loads(itl or "[]")), n_prompt, n_out, json.loads(engine))
            for (v, t, i, rep, run_id, started, ttft, tpot, e2e, itl, n_prompt, n_out, engine)
            in conn.execute(sql, args)]
