"""The results store: every response kept, keyed by (plan, variant, task, item, repeat).

Order of work for a plan runner::

    store = ResultsStore.open(workspace / "results.sqlite")
    run = store.begin_run(plan_hash, plan_name=..., seeds=...)
    store.put_variant(run, "baseline", config, is_baseline=True)
    todo = store.pending(run, planned)          # registers requests; skips answered ones
    for result in engine results:               # as each completes
        store.put_response(run, planned[i], record)   # committed before scoring
    for stored in store.unscored(run.plan_hash):
        store.put_scores(stored.key, ..., scorer="gsm8k@3")
    store.finish_run(run)

A rerun of the same plan hash calls ``pending`` again and gets only what is missing.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from tasks.request import Generation
from validate.engines.engagement import Engagement, ServerCounters
from validate.store import engagement, fidelity, queries, sweeps
from validate.store.codec import (
    dumps,
    logprobs_to_json,
    request_to_stored_dict,
    response_to_dict,
)
from validate.store.connection import (
    StoreOptions,
    connect,
    connect_read_only,
    retry_busy,
    write_transaction,
)
from validate.store.errors import StoreError
from validate.store.owner import OWNER_KEY, this_process
from validate.store.records import (
    OutcomeTable,
    PlannedRequest,
    ResponseKey,
    ResponseRecord,
    RunInfo,
    ScoreRecord,
    StoredResponse,
    TimingRow,
    VariantInfo,
)
from validate.store.sweeps import StoredSweep

T = TypeVar("T")


class ResultsStore:
    """One SQLite results file. Safe to share between threads of one process (a lock
    serialises use of the connection) and between processes (WAL + busy retries)."""

    def __init__(self, path: Path, conn: sqlite3.Connection, options: StoreOptions) -> None:
        self.path = path
        self.options = options
        self._conn = conn
        self._lock = threading.RLock()  # re-entered by the writes inside ``atomic``
        self._atomic = False

    @classmethod
    def open(cls, path: str | Path, options: StoreOptions | None = None, *,
             read_only: bool = False) -> ResultsStore:
        """Open (creating if absent) the store at ``path``; ``read_only``: an existing
        store, read without changing a byte of it (``connection.connect_read_only``)."""
        options = options or StoreOptions()
        path = Path(path)
        if read_only:
            return cls(path, connect_read_only(path, options), options)
        store = cls(path, connect(path, options), options)
        store._import_legacy_fidelity()
        return store

    def _import_legacy_fidelity(self) -> None:
        """Fidelity files a pre-3 store kept beside it go into the table (once per plan);
        a store that cannot be written now still reads them (``fidelity_document``)."""
        with contextlib.suppress(sqlite3.OperationalError):  # a read-only file or folder
            self._write(lambda conn: fidelity.import_files(conn, self.path))

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing -------------------------------------------------------------------
    def _write(self, fn) -> T:
        with self._lock:
            if self._atomic:  # inside ``atomic``: part of its one transaction
                return fn(self._conn)
            return write_transaction(self._conn, fn, self.options, self.path)

    @contextlib.contextmanager
    def atomic(self):
        """Every write inside the block commits together or not at all: an error (or a
        Ctrl-C) anywhere in it rolls back what the block wrote, so a write made of many
        calls (an import of several files) never leaves half of itself in the store.
        Holds the store (and SQLite's write lock) for the whole block."""
        with self._lock:
            if self._atomic:  # nested: the outer block decides
                yield self
                return
            retry_busy(lambda: self._conn.execute("BEGIN IMMEDIATE"), self.options, self.path)
            self._atomic = True
            try:
                yield self
            except BaseException:
                self._atomic = False
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            self._atomic = False
            self._conn.execute("COMMIT")

    def _read(self, fn) -> T:
        with self._lock:
            return retry_busy(lambda: fn(self._conn), self.options, self.path)

    # -- runs and variants ----------------------------------------------------------
    def begin_run(self, plan_hash: str, *, plan_name: str = "", seeds: Sequence[int] = (),
                  plan: Mapping | None = None, identity: Mapping | None = None) -> RunInfo:
        """Record one execution attempt of a plan with the environment that runs it."""
        if identity is None:
            from validate.identity import environment_identity
            identity = environment_identity()
        started = time.time()
        ident = dict(identity)
        owner = this_process()
        stored_identity = {**ident, OWNER_KEY: owner}

        def insert(conn: sqlite3.Connection) -> int:
            cur = conn.execute(
                "INSERT INTO runs (plan_hash, plan_name, plan_json, git_sha, identity_json,"
                " seeds_json, started_at, status) VALUES (?, ?, ?, ?, ?, ?, ?, 'running')",
                (plan_hash, plan_name, None if plan is None else dumps(plan), ident.get("git"),
                 dumps(stored_identity), dumps(list(seeds)), started))
            return int(cur.lastrowid)

        run_id = self._write(insert)
        return RunInfo(run_id, plan_hash, plan_name, ident.get("git"), ident, tuple(seeds),
                       started, None, "running", owner)

    def settle_abandoned(self) -> list[int]:
        """Mark ``interrupted`` every run still ``running`` whose process is gone (it was
        killed before it could say so); returns their ids. A writer calls this before it
        starts a run, so the status is in the file for every reader, here or elsewhere."""
        gone = [r.run_id for r in self.runs() if r.status == "interrupted"
                and r.finished_at is None and r.owner is not None]
        if gone:
            now = time.time()
            self._write(lambda conn: conn.executemany(
                "UPDATE runs SET status = 'interrupted', finished_at = ? WHERE run_id = ?"
                " AND status = 'running'", [(now, run_id) for run_id in gone]))
        return gone

    def finish_run(self, run: RunInfo, status: str = "complete") -> None:
        self._write(lambda conn: conn.execute(
            "UPDATE runs SET finished_at = ?, status = ? WHERE run_id = ?",
            (time.time(), status, run.run_id)))

    def runs(self, plan_hash: str | None = None) -> list[RunInfo]:
        return self._read(lambda conn: queries.runs(conn, plan_hash))

    def put_variant(self, run: RunInfo, name: str, config: Mapping,
                    is_baseline: bool = False) -> None:
        """Record a variant's configuration; a variant of the same plan hash with a
        different configuration is refused (the hash should have changed)."""
        config_json = dumps(dict(config))

        def upsert(conn: sqlite3.Connection) -> None:
            row = conn.execute("SELECT config_json FROM variants WHERE plan_hash = ? AND name = ?",
                               (run.plan_hash, name)).fetchone()
            if row is None:
                conn.execute("INSERT INTO variants VALUES (?, ?, ?, ?)",
                             (run.plan_hash, name, config_json, int(is_baseline)))
            elif row[0] != config_json:
                raise StoreError(f"{self.path}: variant {name!r} of plan {run.plan_hash[:12]} is "
                                 f"stored with a different configuration")

        self._write(upsert)

    def rekey(self, old_hash: str, new_hash: str, configs: Mapping[str, Mapping]) -> int:
        """Move everything stored under plan ``old_hash`` to ``new_hash``, with the
        variants' configs replaced by ``configs`` (name -> config); returns the number of
        runs moved. Used once per plan to adopt a store written before plan hashes
        covered normalised options (``Plan.legacy_hash``); does nothing when
        ``new_hash`` already has runs or ``old_hash`` has none."""

        def move(conn: sqlite3.Connection) -> int:
            if old_hash == new_hash or conn.execute(
                    "SELECT 1 FROM runs WHERE plan_hash = ?", (new_hash,)).fetchone():
                return 0
            moved = conn.execute("UPDATE runs SET plan_hash = ? WHERE plan_hash = ?",
                                 (new_hash, old_hash)).rowcount
            if not moved:
                return 0
            for table in ("requests", "speed_sweeps", "fidelity", "engagement_counters",
                          "speed_rounds", "variant_servers"):
                conn.execute(f"UPDATE {table} SET plan_hash = ? WHERE plan_hash = ?",
                             (new_hash, old_hash))
            for name, config in configs.items():
                conn.execute("UPDATE variants SET plan_hash = ?, config_json = ?"
                             " WHERE plan_hash = ? AND name = ?",
                             (new_hash, dumps(dict(config)), old_hash, name))
            conn.execute("UPDATE variants SET plan_hash = ? WHERE plan_hash = ?",
                         (new_hash, old_hash))
            return moved

        return self._write(move)

    def variants(self, plan_hash: str) -> list[VariantInfo]:
        return self._read(lambda conn: queries.variants(conn, plan_hash))

    # -- requests and responses ----------------------------------------------------
    def pending(self, run: RunInfo, planned: Iterable[PlannedRequest]) -> list[PlannedRequest]:
        """Register the plan's requests and return those without a stored response, in
        the order given. Refuses a request whose prompt differs from the stored one under
        the same key (pairs must be the same prompt: docs/design.md, principle 1)."""
        planned = list(planned)
        self._write(lambda conn: self._register(conn, run.plan_hash, planned))
        answered = self._read(lambda conn: queries.answered_keys(conn, run.plan_hash))
        return [p for p in planned if p.key not in answered]

    def _register(self, conn: sqlite3.Connection, plan_hash: str,
                  planned: Sequence[PlannedRequest]) -> dict[ResponseKey, int]:
        ids: dict[ResponseKey, int] = {}
        for p in planned:
            key, req = p.key, p.request
            sha = req.prompt_sha256
            request_json = dumps(request_to_stored_dict(req, p.store_text))
            conn.execute(
                "INSERT OR IGNORE INTO requests (plan_hash, variant, task, item_id, repeat, kind,"
                " prompt_sha256, request_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (plan_hash, key.variant, key.task, key.item_id, key.repeat, req.kind, sha,
                 request_json))
            request_id, stored_sha, stored_json = conn.execute(
                "SELECT request_id, prompt_sha256, request_json FROM requests WHERE plan_hash = ?"
                " AND variant = ? AND task = ? AND item_id = ? AND repeat = ?",
                (plan_hash, key.variant, key.task, key.item_id, key.repeat)).fetchone()
            if stored_sha != sha or stored_json != request_json:
                raise StoreError(
                    f"{self.path}: request {key.variant}/{key.task}/{key.item_id}#{key.repeat} "
                    f"of plan {plan_hash[:12]} is stored with a different prompt or parameters "
                    f"(stored prompt sha256 {stored_sha[:12]}, now {sha[:12]}); the task data or "
                    f"renderer changed, so start a new plan hash or workspace")
            ids[key] = int(request_id)
        return ids

    def put_response(self, run: RunInfo, planned: PlannedRequest,
                     record: ResponseRecord) -> bool:
        """Commit one response (one transaction). Returns False when a response under
        this key was already stored (another writer got there first; the first wins)."""
        return self.put_responses(run, [(planned, record)])[0]

    def put_responses(self, run: RunInfo,
                      items: Sequence[tuple[PlannedRequest, ResponseRecord]]) -> list[bool]:
        """Commit a small batch of responses in one transaction."""
        now = time.time()

        def insert(conn: sqlite3.Connection) -> list[bool]:
            ids = self._register(conn, run.plan_hash, [p for p, _ in items])
            inserted = []
            for planned, rec in items:
                inserted.append(self._insert_response(conn, run, ids[planned.key], rec, now))
            return inserted

        return self._write(insert)

    @staticmethod
    def _insert_response(conn: sqlite3.Connection, run: RunInfo, request_id: int,
                         rec: ResponseRecord, now: float) -> bool:
        t = rec.timings
        resp = rec.response
        is_gen = isinstance(resp, Generation)
        n_output = t.n_output_tokens if t is not None else None
        if n_output is None and is_gen:
            n_output = resp.n_output_tokens
        cur = conn.execute(
            "INSERT OR IGNORE INTO responses (request_id, run_id, response_json, raw_json,"
            " token_logprobs_json, finish_reason, n_prompt_tokens, n_output_tokens, output_chars,"
            " started_at, ttft_s, tpot_s, e2e_s, itl_json, attempts, engine_json, stored_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (request_id, run.run_id, dumps(response_to_dict(resp)),
             None if rec.raw is None else dumps(rec.raw), logprobs_to_json(rec.token_logprobs),
             resp.finish_reason if is_gen else None,
             None if t is None else t.n_prompt_tokens, n_output,
             len(resp.text) if is_gen else None,
             None if t is None else t.started_at_s, None if t is None else t.ttft_s,
             None if t is None else t.tpot_s, None if t is None else t.e2e_s,
             None if t is None else dumps(list(t.itl_s)), rec.attempts, dumps(dict(rec.engine)),
             now))
        if cur.rowcount == 1 and rec.engagement is not None:
            engagement.put(conn, request_id, rec.engagement)
        return cur.rowcount == 1

    def put_failure(self, run: RunInfo, planned: PlannedRequest, error: str,
                    attempts: int = 1) -> None:
        """Record that a request failed for good in this run (coverage reports it; a
        rerun tries it again because it still has no response)."""

        def insert(conn: sqlite3.Connection) -> None:
            request_id = self._register(conn, run.plan_hash, [planned])[planned.key]
            conn.execute("INSERT INTO failures VALUES (?, ?, ?, ?, ?)",
                         (request_id, run.run_id, error, attempts, time.time()))

        self._write(insert)

    def response(self, plan_hash: str, key: ResponseKey) -> StoredResponse | None:
        return self._read(lambda conn: queries.response(conn, plan_hash, key))

    def responses(self, plan_hash: str, variant: str | None = None,
                  task: str | None = None) -> list[StoredResponse]:
        return self._read(lambda conn: queries.responses(conn, plan_hash, variant, task))

    # -- scores ----------------------------------------------------------------------
    def put_scores(self, plan_hash: str, key: ResponseKey, scores: Sequence[ScoreRecord],
                   scorer: str) -> None:
        """Store (or replace) the scores of a stored response, one row per filter.
        A response must be stored before it is scored (docs/design.md, principle 6)."""
        now = time.time()

        def insert(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                "SELECT r.request_id FROM requests r JOIN responses s USING (request_id)"
                " WHERE r.plan_hash = ? AND r.variant = ? AND r.task = ? AND r.item_id = ?"
                " AND r.repeat = ?",
                (plan_hash, key.variant, key.task, key.item_id, key.repeat)).fetchone()
            if row is None:
                raise StoreError(f"{self.path}: cannot score {key.variant}/{key.task}/"
                                 f"{key.item_id}#{key.repeat}: no stored response")
            conn.executemany(
                "INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(row[0], s.filter, float(s.score), s.extracted, int(s.invalid), scorer, now)
                 for s in scores])

        self._write(insert)

    def unscored(self, plan_hash: str) -> list[StoredResponse]:
        """Stored responses that have no score yet (score them after a resume)."""
        return self._read(lambda conn: queries.responses(conn, plan_hash, None, None,
                                                         unscored_only=True))

    # -- what statistics read --------------------------------------------------------
    def cells(self, plan_hash: str) -> list[tuple[str, str]]:
        """The (variant, task) pairs the plan registered requests for, sorted."""
        return self._read(lambda conn: [tuple(row) for row in conn.execute(
            "SELECT DISTINCT variant, task FROM requests WHERE plan_hash = ?"
            " ORDER BY variant, task", (plan_hash,))])

    def outcomes(self, plan_hash: str, variant: str, task: str) -> OutcomeTable:
        return self._read(lambda conn: queries.outcomes(conn, plan_hash, variant, task))

    def timings(self, plan_hash: str, variant: str | None = None,
                task: str | None = None) -> list[TimingRow]:
        return self._read(lambda conn: queries.timings(conn, plan_hash, variant, task))

    # -- headline speed sweeps ---------------------------------------------------------
    def put_sweep(self, run: RunInfo, variant: str, *, settings: Mapping, sweep: Mapping,
                  headline: Mapping, comparison: Mapping | None = None) -> None:
        """Store one variant's headline sweep (replacing one stored with other settings)."""
        self._write(lambda conn: sweeps.put(conn, run.plan_hash, variant, run.run_id, settings,
                                            sweep, headline, comparison))

    def sweep(self, plan_hash: str, variant: str) -> StoredSweep | None:
        return self._read(lambda conn: sweeps.get(conn, plan_hash, variant))

    def sweeps(self, plan_hash: str) -> list[StoredSweep]:
        return self._read(lambda conn: sweeps.all_of(conn, plan_hash))

    def put_rounds(self, run: RunInfo, *, settings: Mapping, rounds: Mapping) -> None:
        """Store the plan's interleaved speed rounds."""
        self._write(lambda conn: sweeps.put_rounds(conn, run.plan_hash, run.run_id, settings,
                                                   rounds))

    def rounds(self, plan_hash: str) -> tuple[dict, dict] | None:
        """(settings, record) of the plan's interleaved speed rounds, or None."""
        return self._read(lambda conn: sweeps.get_rounds(conn, plan_hash))

    # -- teacher-forced fidelity -------------------------------------------------------
    def put_fidelity(self, plan_hash: str, variant: str, task: str, *, settings: Mapping,
                     method: str, records, complete: bool = True) -> None:
        """Store one (variant, task)'s fidelity records (rows of the plan computed with
        other settings are dropped); ``complete=False`` saves the records so far of a
        pair still being computed (``fidelity_partial`` gives them back to a rerun)."""
        self._write(lambda conn: fidelity.put(conn, plan_hash, variant, task,
                                              settings=settings, method=method,
                                              records=records, complete=complete))

    def fidelity_partial(self, plan_hash: str, variant: str, task: str,
                         settings: Mapping) -> list[dict]:
        """The records saved so far of an unfinished (variant, task), or ``[]``."""
        return self._read(lambda conn: fidelity.partial(conn, plan_hash, variant, task,
                                                        settings))

    def fidelity_document(self, plan_hash: str) -> dict:
        """``{"settings", "method", "records": {variant: {task: [...]}}}`` or ``{}``."""
        doc = self._read(lambda conn: fidelity.document(conn, plan_hash))
        if not doc:  # not imported (a read-only store): the legacy file itself
            doc = self._read(lambda conn: fidelity.legacy_document(self.path, plan_hash))
        return doc

    # -- the engagement ledger ----------------------------------------------------------
    def engagement(self, plan_hash: str, variant: str,
                   task: str) -> dict[tuple[str, int], Engagement]:
        """(item_id, repeat) -> what the optimization did, for responses that have a
        ledger row (absent: unknown)."""
        return self._read(lambda conn: engagement.by_item(conn, plan_hash, variant, task))

    def put_counters(self, run: RunInfo, variant: str, counters: ServerCounters) -> None:
        """Store one variant's counters around its quality pass in this run."""
        self._write(lambda conn: engagement.put_counters(conn, run.plan_hash, variant,
                                                         run.run_id, counters))

    def counters(self, plan_hash: str, variant: str) -> list[ServerCounters]:
        return list(self._read(lambda conn: engagement.counters(conn, plan_hash, variant)))

    def put_server(self, run: RunInfo, variant: str, server: Mapping) -> None:
        """Store what ``variant``'s server said about itself in this run
        (``validate.engines.server_info``)."""
        self._write(lambda conn: conn.execute(
            "INSERT OR REPLACE INTO variant_servers VALUES (?, ?, ?, ?, ?)",
            (run.plan_hash, variant, run.run_id, dumps(dict(server)), time.time())))

    def servers(self, plan_hash: str, variant: str) -> list[dict]:
        """Every stored server record of one variant, oldest run first."""
        return self._read(lambda conn: [json.loads(row[0]) for row in conn.execute(
            "SELECT server_json FROM variant_servers WHERE plan_hash = ? AND variant = ?"
            " ORDER BY run_id", (plan_hash, variant))])

    def amend_identity(self, run: RunInfo, fields: Mapping) -> None:
        """Set ``fields`` in the run's stored identity (what is known only once a server
        answered: the vLLM that served, not the runner's own package)."""

        def update(conn: sqlite3.Connection) -> None:
            row = conn.execute("SELECT identity_json FROM runs WHERE run_id = ?",
                               (run.run_id,)).fetchone()
            conn.execute("UPDATE runs SET identity_json = ? WHERE run_id = ?",
                         (dumps({**json.loads(row[0]), **dict(fields)}), run.run_id))

        self._write(update)

    def integrity_ok(self) -> bool:
        return self._read(
            lambda conn: conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok")
