"""The resumable results store (SQLite, one file per workspace); see ``store.py``."""

from validate.store.connection import StoreOptions
from validate.store.errors import StoreBusyError, StoreError
from validate.store.records import (
    ItemOutcome,
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
from validate.store.schema import SCHEMA_VERSION
from validate.store.store import ResultsStore
from validate.store.sweeps import StoredSweep

__all__ = [
    "SCHEMA_VERSION", "ItemOutcome", "OutcomeTable", "PlannedRequest", "ResponseKey",
    "ResponseRecord", "ResultsStore", "RunInfo", "ScoreRecord", "StoreBusyError", "StoreError",
    "StoreOptions", "StoredResponse", "StoredSweep", "TimingRow", "VariantInfo",
]
