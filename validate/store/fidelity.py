"""Reading and writing the ``fidelity`` table: per (plan, variant, task) the
teacher-forced fidelity records of ``validate.runner.fidelity_pass``, as JSON the store
does not interpret (``validate.fidelity.summary`` summarises them).

Before schema version 3 these lived in ``fidelity/<plan_hash>.json`` beside the store
(copy the store and they were lost); ``import_files`` reads such files into the table
when the store opens for writing, once per plan; a read-only open reads the file
itself (``legacy_document``). A corrupt file is an input error naming it, not a silent
skip.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from validate.store.codec import dumps
from validate.store.errors import StoreError
from validate.textfile import read_text

LEGACY_DIR = "fidelity"  # beside the store file: <dir>/<plan_hash>.json


# A (variant, task) still being computed keeps its records so far under the task name
# plus this suffix (task names never hold '#'), so a killed fidelity pass resumes after
# the last saved batch; ``document`` leaves such rows out, and the complete row replaces
# it. No schema change: the rows are ordinary rows of the same table.
PARTIAL = "#partial"


def put(conn: sqlite3.Connection, plan_hash: str, variant: str, task: str, *,
        settings: Mapping, method: str, records: Sequence[Mapping],
        complete: bool = True) -> None:
    """Store one (variant, task) (``complete=False``: its records so far); rows of the
    plan computed with other settings go."""
    settings_json = dumps(dict(settings))
    conn.execute("DELETE FROM fidelity WHERE plan_hash = ? AND settings_json != ?",
                 (plan_hash, settings_json))
    conn.execute("DELETE FROM fidelity WHERE plan_hash = ? AND variant = ? AND task = ?",
                 (plan_hash, variant, task + PARTIAL))
    conn.execute(
        "INSERT OR REPLACE INTO fidelity (plan_hash, variant, task, settings_json, method,"
        " records_json, stored_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (plan_hash, variant, task if complete else task + PARTIAL, settings_json, method,
         json.dumps([dict(r) for r in records], allow_nan=False), time.time()))


def partial(conn: sqlite3.Connection, plan_hash: str, variant: str, task: str,
            settings: Mapping) -> list[dict]:
    """The records saved so far of an unfinished (variant, task) with these settings."""
    row = conn.execute("SELECT records_json FROM fidelity WHERE plan_hash = ? AND variant = ?"
                       " AND task = ? AND settings_json = ?",
                       (plan_hash, variant, task + PARTIAL, dumps(dict(settings)))).fetchone()
    return [] if row is None else json.loads(row[0])


def document(conn: sqlite3.Connection, plan_hash: str) -> dict:
    """``{"settings", "method", "records": {variant: {task: [record, ...]}}}`` of a plan,
    or ``{}`` when nothing is stored (the shape the JSON files had)."""
    rows = conn.execute("SELECT variant, task, settings_json, method, records_json FROM fidelity"
                        " WHERE plan_hash = ? AND task NOT LIKE ? ORDER BY variant, task",
                        (plan_hash, "%" + PARTIAL)).fetchall()
    if not rows:
        return {}
    records: dict = {}
    for variant, task, _, _, records_json in rows:
        records.setdefault(variant, {})[task] = json.loads(records_json)
    return {"settings": json.loads(rows[-1][2]), "method": rows[-1][3], "records": records}


def legacy_document(store_path: Path, plan_hash: str) -> dict:
    """The legacy file's document of one plan, or ``{}`` when there is none."""
    path = Path(store_path).parent / LEGACY_DIR / f"{plan_hash}.json"
    return read_legacy(path) if path.is_file() else {}


def read_legacy(path: Path) -> dict:
    """A legacy fidelity file's document, checked; a corrupt one is a ``StoreError``
    naming the file and the field (it would otherwise be dropped without a word, or
    crash the summary that reads its records)."""
    try:
        doc = json.loads(read_text(path, StoreError, "legacy fidelity file"))
    except ValueError as exc:
        if isinstance(exc, StoreError):
            raise
        raise StoreError(f"{path}: corrupt legacy fidelity file: not valid JSON ({exc}); "
                         f"move it away to use the store without it") from None

    def bad(field: str, expected: str) -> StoreError:
        return StoreError(f"{path}: corrupt legacy fidelity file: {field}: expected "
                          f"{expected}; move it away to use the store without it")

    if not isinstance(doc, dict):
        raise bad("the document", "a JSON object")
    if not isinstance(doc.get("settings", {}), dict):
        raise bad("settings", "an object")
    if not isinstance(doc.get("method", ""), str):
        raise bad("method", "a string")
    records = doc.get("records", {})
    if not isinstance(records, dict):
        raise bad("records", "an object of variant -> task -> records")
    for variant, by_task in records.items():
        if not isinstance(by_task, dict):
            raise bad(f"records.{variant}", "an object of task -> records")
        for task, rows in by_task.items():
            where = f"records.{variant}.{task}"
            if not isinstance(rows, list):
                raise bad(where, "a list of per-prompt records")
            for i, row in enumerate(rows):
                if not _record_ok(row):
                    raise bad(f"{where}[{i}]", "an object with item_id (a string), kl (numbers "
                                               "or null) and top1 (flags) of one length")
    return doc


def _record_ok(row) -> bool:
    if not isinstance(row, dict) or not isinstance(row.get("item_id"), str):
        return False
    kl, top1 = row.get("kl"), row.get("top1")
    return (isinstance(kl, list) and isinstance(top1, list) and len(kl) == len(top1)
            and all(x is None or (isinstance(x, (int, float)) and not isinstance(x, bool))
                    for x in kl)
            and all(isinstance(x, (bool, int, float)) for x in top1))


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
        doc = read_legacy(path)
        settings, method = doc.get("settings") or {}, doc.get("method", "exact full-vocab")
        for variant, by_task in (doc.get("records") or {}).items():
            for task, records in by_task.items():
                put(conn, plan_hash, variant, task, settings=settings, method=method,
                    records=records)
        done += 1
    return done
