"""Where a run's teacher-forced fidelity records live: a JSON file beside the store.

The results store keeps responses; fidelity needs two engines at once (baseline and
variant teacher-forcing the baseline's greedy tokens), so the runner computes it after
the responses and writes the per-prompt records here, keyed by plan hash, variant and
task. The analysis summarises them (``validate.fidelity.summary``); nothing is lost
when the file is missing (fidelity is then None, and the report says so).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from validate.analysis.model import FidelitySummary


def fidelity_path(store_path: Path, plan_hash: str) -> Path:
    return Path(store_path).parent / "fidelity" / f"{plan_hash}.json"


def read_fidelity(store_path: Path, plan_hash: str) -> dict:
    """{"settings": {...}, "records": {variant: {task: [record dicts]}}, "method": str}."""
    path = fidelity_path(store_path, plan_hash)
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def write_fidelity(store_path: Path, plan_hash: str, doc: Mapping) -> None:
    """Atomic replace, so a killed run leaves the previous file or the new one."""
    path = fidelity_path(store_path, plan_hash)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, allow_nan=False), encoding="utf-8")
    os.replace(tmp, path)


def stored_fidelity(store_path: Path, plan_hash: str):
    """A ``fidelity(variant, task)`` lookup for ``analyze_run`` (None when not stored)."""
    doc = read_fidelity(store_path, plan_hash)
    records = doc.get("records", {})
    method = doc.get("method", "exact full-vocab")

    def lookup(variant: str, task: str) -> FidelitySummary | None:
        rows = records.get(variant, {}).get(task)
        if rows is None:
            return None
        from validate.fidelity.summary import PromptFidelity, summarize

        return summarize([PromptFidelity(r["item_id"], tuple(r["kl"]), tuple(r["top1"]))
                          for r in rows], method)

    return lookup
