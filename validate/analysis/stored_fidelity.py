"""The analysis' view of a run's teacher-forced fidelity: the records the runner stored
in the results store (``fidelity`` table, ``validate.store.fidelity``), summarised per
(variant, task) by ``validate.fidelity.summary``. Nothing is lost when a plan has none
(fidelity is then None, and the report says so).
"""

from __future__ import annotations

from validate.fidelity.types import FidelitySummary
from validate.store import ResultsStore


def stored_fidelity(store: ResultsStore, plan_hash: str):
    """A ``fidelity(variant, task)`` lookup for ``analyze_run`` (None when not stored)."""
    doc = store.fidelity_document(plan_hash)
    records = doc.get("records", {})
    method = doc.get("method", "exact full-vocab")

    def lookup(variant: str, task: str) -> FidelitySummary | None:
        rows = records.get(variant, {}).get(task)
        if rows is None:
            return None
        from validate.fidelity.summary import PromptFidelity, summarize

        return summarize([PromptFidelity.from_dict(r) for r in rows], method)

    return lookup
