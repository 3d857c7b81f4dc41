"""GSM8K items, read from the shipped jsonl files through ``datasets`` (no network).

Each test line becomes one frozen ``Gsm8kItem`` whose id is its line index in
``test.jsonl`` ("gsm8k-test-0042"): file order is lm-eval's ``doc_id`` order, so ids
line up with lm-eval per-sample logs. The train file is only the few-shot pool.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tasks.data_files import GSM8K_TEST, GSM8K_TRAIN, DataFile, read_verified, resolve_data_dir
from tasks.errors import TaskDataError

GSM8K_TEST_SIZE = 1319
GSM8K_TRAIN_SIZE = 7473


@dataclass(frozen=True)
class Gsm8kItem:
    """One GSM8K problem. ``solution`` is the full reference answer (worked steps with
    calculator annotations, ending in ``#### <number>``); ``final_answer`` is the text
    after the last ``####``. ``target`` is set per task variant (see ``Gsm8kTask``)."""

    id: str
    index: int
    question: str
    solution: str
    target: str

    @property
    def final_answer(self) -> str:
        return final_answer_of(self.solution)


def final_answer_of(solution: str) -> str:
    """The text after the last ``####`` of a GSM8K solution (lm-eval's
    ``answer.split('####')[-1].strip()``)."""
    return solution.split("####")[-1].strip()


@dataclass(frozen=True)
class Gsm8kExample:
    """A row of the train pool (few-shot exemplars)."""

    question: str
    solution: str


def _parse_jsonl(payload: bytes, data_file: DataFile, data_dir: Path) -> list[dict]:
    """Rows of a jsonl file, checked for the two keys lm-eval's templates read."""
    rows = []
    for lineno, line in enumerate(payload.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        if not isinstance(row, dict) or not isinstance(row.get("question"), str) \
                or not isinstance(row.get("answer"), str):
            raise TaskDataError(
                f"data file {data_dir / data_file.relpath} line {lineno}: expected an object "
                "with string fields 'question' and 'answer'"
            )
        rows.append({"question": row["question"], "answer": row["answer"]})
    return rows


def _load_split(data_file: DataFile, data_dir: Path, expected_rows: int):
    """A ``datasets.Dataset`` built in memory from the verified file (no cache, no hub)."""
    import datasets

    rows = _parse_jsonl(read_verified(data_file, data_dir), data_file, data_dir)
    if len(rows) != expected_rows:
        raise TaskDataError(
            f"data file {data_dir / data_file.relpath}: expected {expected_rows} rows, "
            f"found {len(rows)}"
        )
    return datasets.Dataset.from_list(rows)


@lru_cache(maxsize=4)
def load_gsm8k_test(data_dir: Path | None = None) -> tuple[tuple[str, str], ...]:
    """(question, solution) for every test item, in file order."""
    ds = _load_split(GSM8K_TEST, resolve_data_dir(data_dir), GSM8K_TEST_SIZE)
    return tuple(zip(ds["question"], ds["answer"], strict=True))


@lru_cache(maxsize=4)
def load_gsm8k_train(data_dir: Path | None = None) -> tuple[Gsm8kExample, ...]:
    """The few-shot pool, in file order (lm-eval samples from it by index)."""
    ds = _load_split(GSM8K_TRAIN, resolve_data_dir(data_dir), GSM8K_TRAIN_SIZE)
    return tuple(Gsm8kExample(q, a) for q, a in zip(ds["question"], ds["answer"], strict=True))


def gsm8k_item_id(index: int) -> str:
    return f"gsm8k-test-{index:04d}"
