"""Reading and writing the ``speed_sweeps`` table: one headline concurrency sweep per
(plan, variant), as JSON documents the store does not interpret (``validate.speed.stored``
turns them back into a ``SweepResult``)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from validate.store.codec import dumps


@dataclass(frozen=True)
class StoredSweep:
    """One variant's stored sweep: the settings it ran with, the per-level timings,
    and the headline (and comparison vs the baseline) the run computed from them."""

    plan_hash: str
    variant: str
    settings: Mapping[str, Any]
    sweep: Mapping[str, Any]
    headline: Mapping[str, Any]
    comparison: Mapping[str, Any] | None
    run_id: int
    stored_at: float


def put(conn: sqlite3.Connection, plan_hash: str, variant: str, run_id: int,
        settings: Mapping, sweep: Mapping, headline: Mapping,
        comparison: Mapping | None) -> None:
    """Insert, or replace a sweep stored with other settings."""
    conn.execute(
        "INSERT OR REPLACE INTO speed_sweeps (plan_hash, variant, settings_json, sweep_json,"
        " headline_json, comparison_json, run_id, stored_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (plan_hash, variant, dumps(dict(settings)), dumps(dict(sweep)), dumps(dict(headline)),
         None if comparison is None else dumps(dict(comparison)), run_id, time.time()))


def _row(row) -> StoredSweep:
    plan_hash, variant, settings, sweep, headline, comparison, run_id, stored_at = row
    return StoredSweep(plan_hash, variant, json.loads(settings), json.loads(sweep),
                       json.loads(headline), None if comparison is None else json.loads(comparison),
                       int(run_id), float(stored_at))


COLUMNS = ("plan_hash, variant, settings_json, sweep_json, headline_json, comparison_json,"
           " run_id, stored_at")


def get(conn: sqlite3.Connection, plan_hash: str, variant: str) -> StoredSweep | None:
    row = conn.execute(f"SELECT {COLUMNS} FROM speed_sweeps WHERE plan_hash = ? AND variant = ?",
                       (plan_hash, variant)).fetchone()
    return None if row is None else _row(row)


def all_of(conn: sqlite3.Connection, plan_hash: str) -> list[StoredSweep]:
    return [_row(r) for r in conn.execute(
        f"SELECT {COLUMNS} FROM speed_sweeps WHERE plan_hash = ? ORDER BY variant", (plan_hash,))]


def put_rounds(conn: sqlite3.Connection, plan_hash: str, run_id: int, settings: Mapping,
               rounds: Mapping) -> None:
    """The plan's interleaved speed rounds (replacing rounds stored with other settings)."""
    conn.execute("INSERT OR REPLACE INTO speed_rounds (plan_hash, settings_json, rounds_json,"
                 " run_id, stored_at) VALUES (?, ?, ?, ?, ?)",
                 (plan_hash, dumps(dict(settings)), dumps(dict(rounds)), run_id, time.time()))


def get_rounds(conn: sqlite3.Connection, plan_hash: str) -> tuple[dict, dict] | None:
    """(settings, rounds record) of the plan, or None."""
    row = conn.execute("SELECT settings_json, rounds_json FROM speed_rounds WHERE plan_hash = ?",
                       (plan_hash,)).fetchone()
    return None if row is None else (json.loads(row[0]), json.loads(row[1]))
