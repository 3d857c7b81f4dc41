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
# The boundary probes (``tasks/testbed/probe_spec.py``), one file per class.
PROBE_SHA256 = {
    "suffix_wm1": "6886a2316304609e4350b967f28d18f9cf5ae2a6a0aa6b4c54d56d172d28db21",
    "suffix_w": "9eeb8ba476418992a7bae6345e95ac236f920edfa9c379a1f7612063b944b873",
    "suffix_wp1": "133353442bc0b0c99446b0be5092a8cff79c1c700eef4145febc9a79f579b8d4",
    "ratio_even": "eebc424db17c9bf073e7282aee5b4d4b5dba4bf4cd4f926f25dfc2872f454efd",
    "ratio_odd": "257f3512b38f0457ebbbcb918fc3bc70dc9d5bc3aba4047411548cac56bd8302",
    "replay_m1": "575b84ec1224d9f9375d17746058ea88143b2aa0831271a0dfeb7d5def3c5e54",
    "replay_0": "edbd7dca3f1a775ed27ee68b616d089c43016250e72b100c6267fa708f82b6fa",
    "replay_p1": "21ff08bb7e081ca23cece9ee26256200318e589787a671eac676b1109a08e0b3",
    "chunk": "9c4dc16dffd2295e7484b3aa206e371621069d3a233cbdf2b33ec0dca1fc6497",
    "hit_aligned": "5c2bd6cef4fe454a9f7b36afd560814d54a705b9f05a5902b9dd10c0da2638d3",
    "hit_unaligned": "b247f130414ba9d1b4462f46a2159326e73568901e67a90ab3ed201be4f4aec3",
}
PROBE_FILES = {f"testbed_probe_{name}": DataFile(f"testbed/probes/{name}.jsonl", digest)
               for name, digest in PROBE_SHA256.items()}
TESTBED_FILES = {
    "testbed_lookup": TESTBED_LOOKUP,
    "testbed_arith": TESTBED_ARITH,
    "testbed_lookup_arith": TESTBED_LOOKUP_ARITH,
    **PROBE_FILES,
}
ALL_FILES = (GSM8K_TEST, GSM8K_TRAIN, GPQA_ZIP, *TESTBED_FILES.values())


def resolve_data_dir(data_dir: Path | str | None) -> Path:
    """The data folder: the shipped one, or ``data_dir``, which must be a directory (a
    regular file or a missing path there is an input error, not a list of failed
    checks)."""
    if data_dir is None:
        return DEFAULT_DATA_DIR
    path = Path(data_dir)
    if not path.is_dir():
        raise TaskDataError(f"--data-dir {path}: "
                            f"{'is not a directory' if path.exists() else 'no such directory'}"
                            f" (expected a folder laid out like tasks/data)")
    return path


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
