"""Where the shipped data lives and what its bytes must hash to.

The data ships inside the package (``tasks/data``) so a fresh clone works with no
network. Every read goes through ``read_verified``: the whole file is hashed before a
single row is parsed, so an edited, truncated or swapped file can never produce a
silently different benchmark. The hashes are the ones recorded in
``tasks/data/README.md`` (the GSM8K pair also matches the "official" hashes quoted in
sglang PR #39995; the GPQA zip matches the upstream authors' commit ``56686c06``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from tasks.errors import TaskDataError

DEFAULT_DATA_DIR = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class DataFile:
    """One shipped file: its path below the data directory and its expected sha256."""

    relpath: str
    sha256: str


GSM8K_TEST = DataFile(
    "gsm8k/test.jsonl", "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14"
)
GSM8K_TRAIN = DataFile(
    "gsm8k/train.jsonl", "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465"
)
GPQA_ZIP = DataFile(
    "gpqa/dataset.zip", "461ae7329f15a3e35f8184d2dac24b990f34fdf12f366ca4062d8e6638cd08dc"
)
# The testbed test sets are generated (``python -m tasks.testbed.generate``); a test
# regenerates them and compares bytes, these hashes pin what ships.
TESTBED_LOOKUP = DataFile(
    "testbed/lookup.jsonl", "f5c04b6fcafef28b83e9a4f07ceeb8460d6d6e63785c90324a0138855448ae87"
)
TESTBED_ARITH = DataFile(
    "testbed/arith.jsonl", "22f67791038db67ecfba67607a6f24349f2c7d4bc0b03db62064ea10d3f8b627"
)
TESTBED_LOOKUP_ARITH = DataFile(
    "testbed/lookup_arith.jsonl", "a175336fd791f6fe379d1c012e07cabe993db07a8458f4dc885b19ada1888506"
)
TESTBED_FILES = {
    "testbed_lookup": TESTBED_LOOKUP,
    "testbed_arith": TESTBED_ARITH,
    "testbed_lookup_arith": TESTBED_LOOKUP_ARITH,
}
ALL_FILES = (GSM8K_TEST, GSM8K_TRAIN, GPQA_ZIP, *TESTBED_FILES.values())


def resolve_data_dir(data_dir: Path | str | None) -> Path:
    return DEFAULT_DATA_DIR if data_dir is None else Path(data_dir)


def read_verified(data_file: DataFile, data_dir: Path | str | None = None) -> bytes:
    """The file's bytes, after checking their sha256; a one-line ``TaskDataError`` if
    the file is missing or its hash differs."""
    path = resolve_data_dir(data_dir) / data_file.relpath
    try:
        payload = path.read_bytes()
    except OSError as exc:
        raise TaskDataError(
            f"data file {path}: cannot read ({exc.strerror or exc}); "
            f"expected sha256 {data_file.sha256}, actual sha256 none (missing)"
        ) from None
    actual = hashlib.sha256(payload).hexdigest()
    if actual != data_file.sha256:
        raise TaskDataError(
            f"data file {path}: checksum mismatch: expected sha256 {data_file.sha256}, "
            f"actual sha256 {actual}"
        )
    return payload
