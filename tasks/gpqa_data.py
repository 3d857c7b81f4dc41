"""GPQA items, read from the shipped password-protected zip entirely in memory.

The GPQA authors ask that questions never appear in plain text online, so the zip
stays as shipped: a member is decrypted into memory, parsed as CSV from a string, and
turned into a ``datasets.Dataset`` with ``from_list``. Nothing is written to disk.
Item ``repr`` hides the question and choices so they cannot leak into tracebacks,
logs or test output; cite items by ``Record ID``.

Choice order (deliberately NOT lm-eval's). lm-eval 0.4.13's GPQA ``process_docs``
shuffles the four answers with the process-global ``random`` module. That order depends
on the global seed, on task load order and, for in-memory data, changes on every access
(prompt and scoring then disagree; docs/evaluation.md §2.5). Here each item's order is a
pure function of its ``Record ID`` and a fixed salt: the four source slots
[Incorrect 1, Incorrect 2, Incorrect 3, Correct] (lm-eval's pre-shuffle order) are
sorted by sha256(salt | record id | slot). No RNG, no ``hash()``, so the same item gets
the same prompt in every run, process, machine and Python version, and the permutation
is recorded on the item. Answer text is cleaned exactly as lm-eval does (strip,
" [title]" -> ". ", double spaces -> one); the question text is left as is.
"""

from __future__ import annotations

import csv
import hashlib
import io
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from tasks.data_files import GPQA_ZIP, read_verified, resolve_data_dir
from tasks.errors import TaskDataError

GPQA_PASSWORD = b"deserted-untie-orchid"
GPQA_SUBSET_SIZES = {"diamond": 198, "main": 448, "extended": 546}
PERMUTATION_SALT = "v41val-gpqa-choice-order-v1"
LETTERS = ("A", "B", "C", "D")
_SOURCE_COLUMNS = ("Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3",
                   "Correct Answer")
_REQUIRED_COLUMNS = ("Record ID", "Question", *_SOURCE_COLUMNS)


@dataclass(frozen=True)
class GpqaItem:
    """One GPQA question with its choices in this toolkit's fixed order.

    ``permutation[j]`` is the source slot shown as letter j, where slots are
    0-2 = Incorrect Answer 1-3 and 3 = Correct Answer. ``answer_index`` is the shown
    position of the correct answer, found as lm-eval finds it (first shown choice equal
    to the cleaned correct answer), and ``target`` is its letter in lm-eval's form "(B)".
    """

    id: str
    subset: str
    permutation: tuple[int, int, int, int]
    answer_index: int
    target: str
    question: str = field(repr=False)
    choices: tuple[str, str, str, str] = field(repr=False)


def clean_answer_text(text: str | None) -> str:
    """lm-eval's GPQA answer cleaning, step for step (a missing value becomes " ")."""
    if text is None:
        return " "
    text = text.strip()
    text = text.replace(" [title]", ". ")
    return text.replace("  ", " ")


def choice_permutation(record_id: str, salt: str = PERMUTATION_SALT) -> tuple[int, ...]:
    """The shown order of the four source slots for one item, from sha256 alone."""

    def rank(slot: int) -> bytes:
        return hashlib.sha256(f"{salt}|{record_id}|{slot}".encode()).digest()

    return tuple(sorted(range(4), key=rank))


def _read_member(subset: str, data_dir: Path) -> list[dict]:
    """The subset's CSV rows, decrypted and parsed in memory."""
    payload = read_verified(GPQA_ZIP, data_dir)
    member = f"dataset/gpqa_{subset}.csv"
    where = f"data file {data_dir / GPQA_ZIP.relpath} member {member}"
    try:
        with zipfile.ZipFile(io.BytesIO(payload)) as archive:
            raw = archive.read(member, pwd=GPQA_PASSWORD)
    except (KeyError, RuntimeError, zipfile.BadZipFile) as exc:
        raise TaskDataError(f"{where}: cannot read ({exc})") from None
    rows = list(csv.DictReader(io.StringIO(raw.decode("utf-8"), newline="")))
    missing = [c for c in _REQUIRED_COLUMNS if rows and c not in rows[0]]
    if missing:
        raise TaskDataError(f"{where}: missing columns {missing}")
    return rows


def _make_item(subset: str, row: dict) -> GpqaItem:
    record_id = row["Record ID"]
    source = [clean_answer_text(row[c]) for c in _SOURCE_COLUMNS]
    perm = choice_permutation(record_id)
    shown = tuple(source[slot] for slot in perm)
    answer_index = shown.index(source[3])
    return GpqaItem(
        id=record_id,
        subset=subset,
        permutation=perm,  # type: ignore[arg-type]
        answer_index=answer_index,
        target=f"({LETTERS[answer_index]})",
        question=row["Question"],
        choices=shown,  # type: ignore[arg-type]
    )


@lru_cache(maxsize=8)
def load_gpqa(subset: str, data_dir: Path | None = None) -> tuple[GpqaItem, ...]:
    """All items of one subset ("diamond", "main", "extended"), in file order."""
    import datasets

    if subset not in GPQA_SUBSET_SIZES:
        raise TaskDataError(f"GPQA subset {subset!r}: expected one of {sorted(GPQA_SUBSET_SIZES)}")
    directory = resolve_data_dir(data_dir)
    rows = _read_member(subset, directory)
    expected = GPQA_SUBSET_SIZES[subset]
    if len(rows) != expected:
        raise TaskDataError(
            f"data file {directory / GPQA_ZIP.relpath} member dataset/gpqa_{subset}.csv: "
            f"expected {expected} rows, found {len(rows)}"
        )
    ds = datasets.Dataset.from_list([{c: r[c] for c in _REQUIRED_COLUMNS} for r in rows])
    items = tuple(_make_item(subset, row) for row in ds)
    if len({item.id for item in items}) != len(items):
        raise TaskDataError(f"GPQA {subset}: 'Record ID' values are not unique")
    return items
