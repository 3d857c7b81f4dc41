"""The SQLite schema of a results store, and its version.

Identity of a response is (plan_hash, variant, task, item_id, repeat): a rerun of the
same plan finds its stored responses by that key and never recomputes them. Runs are
recorded per execution attempt (each with its own environment identity), while
requests, responses and scores belong to the plan, so a resumed run adds to them.
Responses are never updated in place; scores may be replaced (a rescore with a new
extractor), so they live in their own table.

Versions: 1 is the original layout; 2 adds ``speed_sweeps`` (the headline concurrency
sweep of each variant); 3 adds ``fidelity`` (teacher-forced fidelity records, until
then a JSON file beside the store); 4 adds the engagement ledger (``engagement``: what
each response's optimization did, NULL = unknown; ``engagement_counters``: counters read
before and after each variant's quality pass) and ``speed_rounds`` (interleaved speed
rounds); 5 adds ``variant_servers`` (what each variant's server said about itself in
each run: version, effective config, log lines). Opening an older store upgrades it in place by
running ``MIGRATIONS[v]`` for each version v it is behind (each only adds a table, so
nothing stored before changes meaning); the store then imports the legacy fidelity
files beside it (``validate.store.fidelity``).
"""

from __future__ import annotations

SCHEMA_VERSION = 5
APPLICATION_ID = 0x56343156  # "V41V": marks the SQLite file as a v41val results store
APPLICATION_NAME = "v41val-results"

DDL = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE runs (
    run_id        INTEGER PRIMARY KEY,
    plan_hash     TEXT NOT NULL,
    plan_name     TEXT NOT NULL,
    plan_json     TEXT,
    git_sha       TEXT,
    identity_json TEXT NOT NULL,   -- package versions, hardware, python, platform
    seeds_json    TEXT NOT NULL,
    started_at    REAL NOT NULL,
    finished_at   REAL,
    status        TEXT NOT NULL    -- running | complete | failed
);
CREATE INDEX runs_by_plan ON runs (plan_hash);

CREATE TABLE variants (
    plan_hash   TEXT NOT NULL,
    name        TEXT NOT NULL,
    config_json TEXT NOT NULL,
    is_baseline INTEGER NOT NULL,
    PRIMARY KEY (plan_hash, name)
);

CREATE TABLE requests (
    request_id    INTEGER PRIMARY KEY,
    plan_hash     TEXT NOT NULL,
    variant       TEXT NOT NULL,
    task          TEXT NOT NULL,
    item_id       TEXT NOT NULL,
    repeat        INTEGER NOT NULL,
    kind          TEXT NOT NULL,
    prompt_sha256 TEXT NOT NULL,
    request_json  TEXT NOT NULL,
    UNIQUE (plan_hash, variant, task, item_id, repeat)
);

CREATE TABLE responses (
    request_id       INTEGER PRIMARY KEY REFERENCES requests (request_id),
    run_id           INTEGER NOT NULL REFERENCES runs (run_id),
    response_json    TEXT NOT NULL,   -- the Generation / Loglikelihoods
    raw_json         TEXT,            -- the server's reply (or the reassembled stream)
    token_logprobs_json TEXT,
    finish_reason    TEXT,
    n_prompt_tokens  INTEGER,
    n_output_tokens  INTEGER,
    output_chars     INTEGER,
    started_at       REAL,
    ttft_s           REAL,
    tpot_s           REAL,
    e2e_s            REAL,
    itl_json         TEXT,
    attempts         INTEGER NOT NULL,
    engine_json      TEXT NOT NULL,
    stored_at        REAL NOT NULL
);

CREATE TABLE scores (
    request_id  INTEGER NOT NULL REFERENCES responses (request_id),
    filter      TEXT NOT NULL,
    score       REAL NOT NULL,
    extracted   TEXT,
    invalid     INTEGER NOT NULL,
    scorer      TEXT NOT NULL,      -- task version / extractor that produced the score
    scored_at   REAL NOT NULL,
    PRIMARY KEY (request_id, filter)
);

CREATE TABLE failures (
    request_id  INTEGER NOT NULL REFERENCES requests (request_id),
    run_id      INTEGER NOT NULL REFERENCES runs (run_id),
    error       TEXT NOT NULL,
    attempts    INTEGER NOT NULL,
    failed_at   REAL NOT NULL
);
CREATE INDEX failures_by_request ON failures (request_id);
"""

# The headline sweep of one variant (validate.runner.speed_pass). ``settings_json`` is the
# plan's [speed] table the sweep ran with (a rerun with the same settings skips it);
# ``sweep_json`` holds every level's per-request timings, enough to recompute every
# figure; ``headline_json`` / ``comparison_json`` are what the run computed from them.
SPEED_SWEEPS_DDL = """
CREATE TABLE speed_sweeps (
    plan_hash       TEXT NOT NULL,
    variant         TEXT NOT NULL,
    settings_json   TEXT NOT NULL,
    sweep_json      TEXT NOT NULL,
    headline_json   TEXT NOT NULL,
    comparison_json TEXT,           -- vs the plan's baseline; NULL for the baseline
    run_id          INTEGER NOT NULL REFERENCES runs (run_id),
    stored_at       REAL NOT NULL,
    PRIMARY KEY (plan_hash, variant)
);
"""

# Teacher-forced fidelity of one (plan, variant, task) against the plan's baseline
# (validate.runner.fidelity_pass): ``settings_json`` the prompts/tokens it ran with (a
# rerun with other settings recomputes), ``records_json`` one record per prompt.
FIDELITY_DDL = """
CREATE TABLE fidelity (
    plan_hash     TEXT NOT NULL,
    variant       TEXT NOT NULL,
    task          TEXT NOT NULL,
    settings_json TEXT NOT NULL,
    method        TEXT NOT NULL,
    records_json  TEXT NOT NULL,
    stored_at     REAL NOT NULL,
    PRIMARY KEY (plan_hash, variant, task)
);
"""

# The engagement ledger (validate.engines.engagement). One row per response whose engine
# could tell anything; a response without a row (an older store, an engine that reports
# nothing) is unknown, and so is every NULL column: never read NULL as 0.
# ``engagement_counters``: one row per (plan, variant, run) quality pass: the engine's
# counters before and after it (the runtime's totals, or a server's /metrics) and the
# server log's bounded-replay lines.
ENGAGEMENT_DDL = """
CREATE TABLE engagement (
    request_id      INTEGER PRIMARY KEY REFERENCES responses (request_id),
    source          TEXT NOT NULL,   -- runtime | usage
    prompt_tokens   INTEGER,
    hit_tokens      INTEGER,         -- prefix-cache hit tokens
    replayed_tokens INTEGER,         -- cached tokens bounded replay fed again
    trimmed         INTEGER,         -- 1: some prefill chunk was decoder-trimmed
    trim_layer      INTEGER,         -- the first trimmed layer
    trimmed_rows    INTEGER,
    kernels_json    TEXT             -- op -> implementation that ran
);

CREATE TABLE engagement_counters (
    plan_hash      TEXT NOT NULL,
    variant        TEXT NOT NULL,
    run_id         INTEGER NOT NULL REFERENCES runs (run_id),
    source         TEXT NOT NULL,    -- runtime | metrics
    before_json    TEXT NOT NULL,
    after_json     TEXT NOT NULL,
    log_lines_json TEXT NOT NULL,
    stored_at      REAL NOT NULL,
    PRIMARY KEY (plan_hash, variant, run_id)
);
"""

# Interleaved speed rounds of a plan (validate.runner.rounds_pass): every variant served
# the same requests once per round, the order alternating; ``rounds_json`` keeps every
# request's timings (validate.speed.interleaved.rounds_to_record).
SPEED_ROUNDS_DDL = """
CREATE TABLE speed_rounds (
    plan_hash     TEXT PRIMARY KEY,
    settings_json TEXT NOT NULL,
    rounds_json   TEXT NOT NULL,
    run_id        INTEGER NOT NULL REFERENCES runs (run_id),
    stored_at     REAL NOT NULL
);
"""

# The server behind each variant in each run (validate.engines.server_info): its
# /version, its /v1/models (effective max_model_len), and for a launched vLLM the launch
# (argv, environment, log path) and the log's bounded-replay / decoder-trim lines.
VARIANT_SERVERS_DDL = """
CREATE TABLE variant_servers (
    plan_hash   TEXT NOT NULL,
    variant     TEXT NOT NULL,
    run_id      INTEGER NOT NULL REFERENCES runs (run_id),
    server_json TEXT NOT NULL,
    stored_at   REAL NOT NULL,
    PRIMARY KEY (plan_hash, variant, run_id)
);
"""

DDL = (DDL + SPEED_SWEEPS_DDL + FIDELITY_DDL + ENGAGEMENT_DDL + SPEED_ROUNDS_DDL
       + VARIANT_SERVERS_DDL)

# version v -> the DDL that turns a version-v store into version v + 1
MIGRATIONS = {1: SPEED_SWEEPS_DDL, 2: FIDELITY_DDL, 3: ENGAGEMENT_DDL + SPEED_ROUNDS_DDL,
              4: VARIANT_SERVERS_DDL}
