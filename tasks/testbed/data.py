"""Testbed items, read from the shipped JSONL (sha256-checked before parsing).

The files are generated, but evaluation reads the shipped bytes, not the generator:
a run's items are then pinned by a hash that reports can quote, exactly like the
GSM8K and GPQA files, and a change to the generator cannot silently change a
benchmark (the regeneration test fails first).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tasks.data_files import TESTBED_FILES, read_verified, resolve_data_dir
from tasks.errors import TaskDataError
from tasks.testbed.catalog import ALL_SPECS as SPECS
from tasks.testbed.testset import item_id


@dataclass(frozen=True)
class TestbedItem:
    """One test item. ``target`` is the worked answer ending in ``#### N`` (scored
    like a GSM8K solution); ``final_answer`` is N."""

    id: str
    index: int
    question: str
    target: str

    __test__ = False  # not a pytest class, despite the name

    @property
    def final_answer(self) -> str:
        return self.target.split("####")[-1].strip()


def _row(line: str, where: str, index: int, task_name: str) -> TestbedItem:
    row = json.loads(line)
    expected_id = item_id(task_name, index)
    if not isinstance(row, dict) or row.get("id") != expected_id \
            or not isinstance(row.get("question"), str) or not isinstance(row.get("answer"), str):
        raise TaskDataError(f"data file {where} line {index + 1}: expected an object with "
                            f"id {expected_id!r} and string fields 'question' and 'answer'")
    return TestbedItem(expected_id, index, row["question"], row["answer"])


@lru_cache(maxsize=8)
def load_testbed(task_name: str, data_dir: Path | None = None) -> tuple[TestbedItem, ...]:
    """Every test item of ``task_name``, in file (= id) order."""
    data_file = TESTBED_FILES[task_name]
    where = str(resolve_data_dir(data_dir) / data_file.relpath)
    lines = read_verified(data_file, data_dir).decode("ascii").splitlines()
    items = tuple(_row(line, where, i, task_name) for i, line in enumerate(lines))
    expected = SPECS[task_name].test_size
    if len(items) != expected:
        raise TaskDataError(f"data file {where}: expected {expected} rows, found {len(items)}")
    return items
