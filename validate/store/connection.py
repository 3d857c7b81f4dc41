"""Opening a results file safely: WAL, busy timeout, retry on SQLITE_BUSY, schema checks.

Durability: WAL journal with ``synchronous=FULL`` by default, one transaction per
response (or per small batch). In WAL mode a committed transaction already survives a
killed process (``kill -9``) with ``synchronous=NORMAL``; FULL additionally fsyncs the
WAL at every commit so it also survives a power loss or an OS crash. A response costs
seconds of accelerator time and an fsync about a millisecond, so FULL is the default;
``StoreOptions(synchronous="normal")`` trades the power-loss guarantee for speed.

Concurrency: several processes may write one file. Every write transaction starts with
``BEGIN IMMEDIATE`` (the write lock is taken up front, so two writers never deadlock
upgrading a read lock), SQLite's busy handler waits up to ``busy_timeout_s``, and a
transaction that still meets SQLITE_BUSY/LOCKED is retried with backoff a bounded number
of times before ``StoreBusyError``.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from validate.store.errors import StoreBusyError, StoreError
from validate.store.schema import (
    APPLICATION_ID,
    APPLICATION_NAME,
    DDL,
    MIGRATIONS,
    SCHEMA_VERSION,
)

T = TypeVar("T")

SQLITE_HEADER = b"SQLite format 3\x00"


@dataclass(frozen=True)
class StoreOptions:
    synchronous: Literal["full", "normal"] = "full"
    busy_timeout_s: float = 30.0
    max_busy_retries: int = 20


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def connect(path: Path, options: StoreOptions) -> sqlite3.Connection:
    """Open (creating if absent) the store at ``path``, checked and ready to write."""
    _refuse_foreign_file(path)
    path.parent.mkdir(parents=True, exist_ok=True)

    def prepare(conn: sqlite3.Connection) -> None:
        retry_busy(lambda: _refuse_foreign_database(conn, path), options, path)
        retry_busy(lambda: _enable_wal(conn, path), options, path)
        conn.execute(f"PRAGMA synchronous = {options.synchronous.upper()}")
        conn.execute("PRAGMA foreign_keys = ON")
        retry_busy(lambda: _ensure_schema(conn, path), options, path)

    return _open(str(path), False, path, options, prepare)


def _open(target: str, uri: bool, path: Path, options: StoreOptions,
          prepare: Callable[[sqlite3.Connection], None]) -> sqlite3.Connection:
    """An SQLite connection to ``target`` with ``prepare`` run on it; SQLite's errors
    become one-line store errors naming ``path`` (closing the connection)."""
    try:
        conn = sqlite3.connect(target, uri=uri, timeout=options.busy_timeout_s,
                               isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: cannot open results store: {exc}") from None
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(options.busy_timeout_s * 1000)}")
        prepare(conn)
    except sqlite3.DatabaseError as exc:
        conn.close()
        if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
            raise StoreBusyError(f"{path}: results store stayed locked: {exc}") from None
        raise StoreError(f"{path}: not a v41val results store ({exc})") from None
    except BaseException:
        conn.close()
        raise
    return conn


def connect_read_only(path: Path, options: StoreOptions) -> sqlite3.Connection:
    """Open the existing store at ``path`` for reading only: an SQLite ``mode=ro``
    connection, no journal-mode change, no schema creation or upgrade, so a command that
    was only asked to read a file (``report``, ``history``, ``compare --store``) never
    changes it, even when it turns out to be another application's database. An older
    store's missing tables are stood in for by empty TEMP tables (in memory, not in the
    file), so it reads as an upgraded one would."""
    if not path.is_file():
        raise StoreError(f"{path}: no results store here (expected an existing file)")
    if path.stat().st_size == 0:
        raise StoreError(f"{path}: not a v41val results store (an empty file)")
    _refuse_foreign_file(path)
    return _open(path.resolve().as_uri() + "?mode=ro", True, path, options,
                 lambda conn: retry_busy(lambda: _check_read_only(conn, path), options, path))


def _check_read_only(conn: sqlite3.Connection, path: Path) -> None:
    app_id, n_objects = _identity(conn)
    if app_id != APPLICATION_ID and not n_objects:
        raise StoreError(f"{path}: an empty SQLite database, not yet a v41val results store "
                         "(is a run still creating it?)")
    if app_id != APPLICATION_ID:
        raise StoreError(f"{path}: an SQLite database but not a v41val results store")
    version = _check_version(conn, path)
    while version < SCHEMA_VERSION:
        for statement in _statements(MIGRATIONS[version]):
            conn.execute(statement.replace("CREATE TABLE ", "CREATE TEMP TABLE ", 1))
        version += 1


def _refuse_foreign_file(path: Path) -> None:
    if path.is_dir():
        raise StoreError(f"{path}: is a directory, expected a v41val results file")
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb") as fh:
        head = fh.read(len(SQLITE_HEADER))
    if head != SQLITE_HEADER:
        raise StoreError(f"{path}: not a v41val results store (not an SQLite database)")


def _refuse_foreign_database(conn: sqlite3.Connection, path: Path) -> None:
    """Another application's database is refused before anything is written to it
    (switching it to WAL would already change its header).

    Both facts come from one statement, so one snapshot: read apart, a second process
    creating the same new store could commit between them, and this one would see an
    application id of 0 next to the newly committed tables and refuse its own store."""
    app_id, n_objects = _identity(conn)
    if app_id != APPLICATION_ID and n_objects:
        raise StoreError(f"{path}: an SQLite database but not a v41val results store")


def _identity(conn: sqlite3.Connection) -> tuple[int, int]:
    """(application id, schema objects) of the file, read in one statement: one snapshot."""
    return conn.execute("SELECT (SELECT application_id FROM pragma_application_id),"
                        " (SELECT count(*) FROM sqlite_master)").fetchone()


def _enable_wal(conn: sqlite3.Connection, path: Path) -> None:
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        raise StoreError(f"{path}: cannot switch the results store to WAL (got {mode!r})")


def _ensure_schema(conn: sqlite3.Connection, path: Path) -> None:
    """Create the schema in a new file, or check an existing one, in one transaction so
    two processes creating the same new file cannot both create it."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        n_objects = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if app_id == 0 and n_objects == 0:
            for statement in _statements(DDL):
                conn.execute(statement)
            conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", [
                ("application", APPLICATION_NAME),
                ("schema_version", str(SCHEMA_VERSION)),
                ("created_at", repr(time.time())),
            ])
        elif app_id != APPLICATION_ID:
            raise StoreError(f"{path}: an SQLite database but not a v41val results store")
        else:
            _upgrade(conn, _check_version(conn, path))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _check_version(conn: sqlite3.Connection, path: Path) -> int:
    """The stored schema version, when this v41val reads it (now or after ``_upgrade``)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.OperationalError:
        row = None
    if row is None:
        raise StoreError(f"{path}: v41val results store without a schema_version (damaged?)")
    try:
        version = int(row[0])
    except ValueError:
        raise StoreError(f"{path}: schema_version {row[0]!r} is not an integer") from None
    if version > SCHEMA_VERSION:
        raise StoreError(f"{path}: results store has schema version {version}, newer than this "
                         f"v41val reads ({SCHEMA_VERSION}); upgrade v41val")
    if version != SCHEMA_VERSION and version not in MIGRATIONS:
        raise StoreError(f"{path}: results store has unknown schema version {version} "
                         f"(this v41val reads {SCHEMA_VERSION})")
    return version


def _upgrade(conn: sqlite3.Connection, version: int) -> None:
    """Bring an older store to SCHEMA_VERSION inside the caller's transaction (each
    migration only adds tables, so an old v41val's rows keep their meaning)."""
    while version < SCHEMA_VERSION:
        for statement in _statements(MIGRATIONS[version]):
            conn.execute(statement)
        version += 1
        conn.execute(f"PRAGMA user_version = {version}")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))


def _statements(script: str) -> list[str]:
    """Split the DDL on ';' (it has no string literals containing ';'), dropping comments
    so ``execute`` can run each inside our own transaction (``executescript`` would
    commit it)."""
    lines = [line.split("--", 1)[0] for line in script.splitlines()]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def retry_busy(fn: Callable[[], T], options: StoreOptions, path: Path) -> T:
    """Call ``fn``; when it meets SQLITE_BUSY/LOCKED, back off and call it again."""
    rng = random.Random()
    for attempt in range(options.max_busy_retries + 1):
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                raise
            if attempt == options.max_busy_retries:
                raise StoreBusyError(f"{path}: results store stayed locked after "
                                     f"{attempt + 1} attempts: {exc}") from None
            time.sleep(min(1.0, 0.01 * 2**attempt) * rng.uniform(0.5, 1.0))
    raise AssertionError("unreachable")


def write_transaction(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T],
                      options: StoreOptions, path: Path) -> T:
    """Run ``fn(conn)`` inside BEGIN IMMEDIATE ... COMMIT, retrying the whole
    transaction on SQLITE_BUSY."""

    def attempt() -> T:
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(conn)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return result

    return retry_busy(attempt, options, path)
