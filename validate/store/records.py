"""What goes into the results store and what comes out of it, as frozen dataclasses."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tasks.request import Generation, Loglikelihoods, Request
from validate.engines.base import Timings, TokenLogprob
from validate.engines.engagement import Engagement


@dataclass(frozen=True)
class ResponseKey:
    """Within one plan, identifies a response: (variant, task, item id, repeat)."""

    variant: str
    task: str
    item_id: str
    repeat: int


@dataclass(frozen=True)
class PlannedRequest:
    """One request the plan wants answered: ``request`` under ``variant``, repeat r."""

    variant: str
    repeat: int
    request: Request
    # False for tasks whose text must never be written down (GPQA: its authors ask that
    # questions never appear in plain text). The store then keeps the prompt's sha256,
    # parameters and continuations, with the text itself replaced by a placeholder.
    store_text: bool = True

    @property
    def key(self) -> ResponseKey:
        return ResponseKey(self.variant, self.request.task, self.request.item_id, self.repeat)


@dataclass(frozen=True)
class ResponseRecord:
    """A response to store: the task-facing answer plus everything the speed and
    fidelity metrics need later (timings, per-token logprobs, the raw reply)."""

    response: Generation | Loglikelihoods
    timings: Timings | None = None
    token_logprobs: tuple[TokenLogprob, ...] | None = None
    raw: Mapping | None = None
    attempts: int = 1
    engine: Mapping = field(default_factory=dict)
    engagement: Engagement | None = None  # the ledger row (None: the engine told nothing)


@dataclass(frozen=True)
class ScoreRecord:
    """One filter's score of one response (``strict-match``, ``flexible-extract``, ...)."""

    filter: str
    score: float
    extracted: str | None = None
    invalid: bool = False


@dataclass(frozen=True)
class RunInfo:
    run_id: int
    plan_hash: str
    plan_name: str
    git_sha: str | None
    identity: Mapping
    seeds: tuple[int, ...]
    started_at: float
    finished_at: float | None
    status: str
    owner: Mapping | None = None  # the process that ran it (``validate.store.owner``)


@dataclass(frozen=True)
class VariantInfo:
    name: str
    config: Mapping
    is_baseline: bool


@dataclass(frozen=True)
class StoredResponse:
    key: ResponseKey
    run_id: int
    request: Request
    record: ResponseRecord


@dataclass(frozen=True)
class ItemOutcome:
    """One (item, repeat) of a (variant, task): its scores per filter, or why it has
    none. ``responded`` False means the plan asked for it and no response is stored
    (coverage counts it); ``failed`` holds the last engine error if one was recorded."""

    item_id: str
    repeat: int
    prompt_sha256: str
    responded: bool
    finish_reason: str | None = None
    n_output_tokens: int | None = None
    output_chars: int | None = None
    scores: Mapping[str, float] = field(default_factory=dict)
    invalid: Mapping[str, bool] = field(default_factory=dict)
    extracted: Mapping[str, str | None] = field(default_factory=dict)
    failed: str | None = None


@dataclass(frozen=True)
class OutcomeTable:
    """Per-item outcomes of one (variant, task): what paired statistics and health
    checks read. Rows are sorted by (item_id, repeat)."""

    plan_hash: str
    variant: str
    task: str
    filters: tuple[str, ...]
    rows: tuple[ItemOutcome, ...]


@dataclass(frozen=True)
class TimingRow:
    """Timings of one stored response, with the engine metadata that states its
    operating point (concurrency, endpoint)."""

    variant: str
    task: str
    item_id: str
    repeat: int
    run_id: int
    started_at_s: float | None
    ttft_s: float | None
    tpot_s: float | None
    e2e_s: float | None
    itl_s: tuple[float, ...]
    n_prompt_tokens: int | None
    n_output_tokens: int | None
    engine: Mapping
