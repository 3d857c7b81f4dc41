"""Opening results files: new, foreign, damaged, newer or unknown schema versions."""

from __future__ import annotations

import sqlite3

import pytest

from validate.store import SCHEMA_VERSION, ResultsStore, StoreError
from validate.store.connection import _refuse_foreign_database as refuse_foreign_database


def test_new_file_gets_schema_version_and_wal(tmp_path):
    db = tmp_path / "ws" / "results.sqlite"
    ResultsStore.open(db).close()
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    assert meta["schema_version"] == str(SCHEMA_VERSION)
    assert meta["application"] == "v41val-results"
    conn.close()
    ResultsStore.open(db).close()  # reopening an existing store is fine


def _one_line_error(db) -> str:
    with pytest.raises(StoreError) as info:
        ResultsStore.open(db)
    message = str(info.value)
    assert "\n" not in message and str(db) in message
    return message


def test_text_file_is_refused(tmp_path):
    db = tmp_path / "notes.sqlite"
    db.write_text("these are my notes, not a database\n")
    assert "not an SQLite database" in _one_line_error(db)
    assert db.read_text() == "these are my notes, not a database\n"  # untouched


def test_foreign_sqlite_database_is_refused(tmp_path):
    db = tmp_path / "other.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE customers (id INTEGER)")
    conn.commit()
    conn.close()
    assert "not a v41val results store" in _one_line_error(db)


class _CreatedBetweenStatements:
    """A connection after whose first statement a second connection (standing in for a
    second process) creates the same new store: the interleaving that made one of four
    writers opening a new store together refuse it as foreign (seen in CI)."""

    def __init__(self, db):
        self.db, self.conn, self.statements = db, sqlite3.connect(db, isolation_level=None), 0

    def execute(self, sql, *args):
        rows = self.conn.execute(sql, *args).fetchall()
        self.statements += 1
        if self.statements == 1:
            ResultsStore.open(self.db).close()
        return _Rows(rows)


class _Rows:
    def __init__(self, rows):
        self.rows = rows

    def fetchone(self):
        return self.rows[0] if self.rows else None


def test_foreign_check_reads_one_snapshot_while_another_process_creates_the_store(tmp_path):
    db = tmp_path / "results.sqlite"
    sqlite3.connect(db).close()  # the new, empty file both processes open
    conn = _CreatedBetweenStatements(db)
    refuse_foreign_database(conn, db)  # must not call the store it is racing for foreign
    assert conn.statements >= 1
    conn.conn.close()
    ResultsStore.open(db).close()


def _set_version(db, version: str) -> None:
    conn = sqlite3.connect(db)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
    conn.commit()
    conn.close()


def test_newer_schema_is_refused(tmp_path):
    db = tmp_path / "results.sqlite"
    ResultsStore.open(db).close()
    _set_version(db, str(SCHEMA_VERSION + 1))
    message = _one_line_error(db)
    assert f"schema version {SCHEMA_VERSION + 1}" in message and "newer" in message


def test_unknown_older_schema_is_refused(tmp_path):
    db = tmp_path / "results.sqlite"
    ResultsStore.open(db).close()
    _set_version(db, "0")
    assert "unknown schema version 0" in _one_line_error(db)


def test_garbage_schema_version_is_refused(tmp_path):
    db = tmp_path / "results.sqlite"
    ResultsStore.open(db).close()
    _set_version(db, "one")
    assert "not an integer" in _one_line_error(db)


def test_directory_is_refused(tmp_path):
    assert "is a directory" in _one_line_error(tmp_path)


def test_store_error_is_a_user_error():
    from v41val.cli.common import is_user_error

    assert is_user_error(StoreError("x"))


def test_reading_an_sqlite_file_with_no_tables_yet_says_so(tmp_path):
    """What a reader meets while a run is creating the store: SQLite's header, no schema."""
    db = tmp_path / "results.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    assert db.stat().st_size > 0
    with pytest.raises(StoreError) as info:
        ResultsStore.open(db, read_only=True)
    assert str(info.value) == (f"{db}: an empty SQLite database, not yet a v41val results store "
                               "(is a run still creating it?)")
