"""Reading and writing the ``fidelity`` table: per (plan, variant, task) the
teacher-forced fidelity records of ``validate.runner.fidelity_pass``, as JSON the store
does not interpret (``validate.fidelity.summary`` summarises them).

Before schema version 3 these lived in ``fidelity/<plan_hash>.json`` beside the store
(copy the store and they were lost); ``import_files`` reads such files into the table
when the store opens, once per plan.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from validate.store.codec import dumps

LEGACY_DIR = "fidelity"  # beside the store file: <dir>/<plan_hash>.json


def put(conn: sqlite3.Connection, plan_hash: str, variant: str, task: str, *,
        settings: Mapping, method: str, records: Sequence[Mapping]) -> None:
    """Store one (variant, task); rows of the plan computed with other settings go."""
    settings_json = dumps(dict(settings))
    conn.execute("DELETE FROM fidelity WHERE plan_hash = ? AND settings_json != ?",
                 (plan_hash, settings_json))
    conn.execute(
        "INSERT OR REPLACE INTO fidelity (plan_hash, variant, task, settings_json, method,"
        " records_json, stored_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (plan_hash, variant, task, settings_json, method,
         json.dumps([dict(r) for r in records], allow_nan=False), time.time()))


def document(conn: sqlite3.Connection, plan_hash: str) -> dict:
    """``{"settings", "method", "records": {variant: {task: [record, ...]}}}`` of a plan,
    or ``{}`` when nothing is stored (the shape the JSON files had)."""
    rows = conn.execute("SELECT variant, task, settings_json, method, records_json FROM fidelity"
                        " WHERE plan_hash = ? ORDER BY variant, task", (plan_hash,)).fetchall()
    if not rows:
        return {}
    records: dict = {}
    for variant, task, _, _, records_json in rows:
        records.setdefault(variant, {})[task] = json.loads(records_json)
    return {"settings": json.loads(rows[-1][2]), "method": rows[-1][3], "records": records}


def legacy_document(store_path: Path, plan_hash: str) -> dict:
    """The legacy file's document of one plan, or ``{}``."""
    path = Path(store_path).parent / LEGACY_DIR / f"{plan_hash}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def import_files(conn: sqlite3.Connection, store_path: Path) -> int:
    """Read every legacy ``fidelity/<plan_hash>.json`` beside the store whose plan has
    runs here and no fidelity rows yet; returns how many files were imported (the files
    are left in place)."""
    folder = Path(store_path).parent / LEGACY_DIR
    if not folder.is_dir():
        return 0
    done = 0
    for path in sorted(folder.glob("*.json")):
        plan_hash = path.stem
        if conn.execute("SELECT 1 FROM fidelity WHERE plan_hash = ?", (plan_hash,)).fetchone() \
                or not conn.execute("SELECT 1 FROM runs WHERE plan_hash = ?",
                                    (plan_hash,)).fetchone():
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a half-written or foreign file: nothing to import
        settings, method = doc.get("settings") or {}, doc.get("method", "exact full-vocab")
        for variant, by_task in (doc.get("records") or {}).items():
            for task, records in by_task.items():
                put(conn, plan_hash, variant, task, settings=settings, method=method,
                    records=records)
        done += 1
    return done
