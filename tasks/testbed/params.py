"""The knobs of the testbed generators, one frozen dataclass per task.

Why frozen dataclasses: the parameters *are* the test set. The shipped files are a
pure function of (parameters, seed, generator code); a test regenerates them and
compares bytes, so any change here shows up as a hash mismatch and needs a task
version bump (``tasks/CHANGELOG.md``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

WINDOW = 32  # tokens; the testbed's sliding window (runtime/presets.py testbed_config)
MIN_RECORD_CHARS = 6  # "K7Q=5\n": a record line is 6 or 7 bytes (= tokens)


@dataclass(frozen=True)
class LengthMix:
    """How many records an item holds: most items draw uniformly from
    ``[short_min, short_max]``, a ``long_fraction`` of them from
    ``(short_max, long_max]``. Keeps the mean prompt a few hundred tokens (the CPU demo
    pays ~1 ms per prompt token per variant) while a tail spans tens of windows."""

    short_min: int
    short_max: int
    long_max: int
    long_fraction: float

    def __post_init__(self) -> None:
        if not (0 <= self.short_min <= self.short_max < self.long_max):
            raise ValueError(f"LengthMix: need 0 <= short_min <= short_max < long_max: {self}")
        if not 0.0 <= self.long_fraction <= 1.0:
            raise ValueError(f"LengthMix: long_fraction must be in [0, 1]: {self}")

    def draw(self, rng: random.Random) -> int:
        if rng.random() < self.long_fraction:
            return rng.randint(self.short_max + 1, self.long_max)
        return rng.randint(self.short_min, self.short_max)


def _check_far_enough(records: LengthMix, min_windows_back: int, n_queried: int,
                      tail_chars: int) -> None:
    """Refuse parameters under which an item could have fewer than ``n_queried``
    records at least ``min_windows_back`` windows before the prompt's end, even with
    every record at its shortest."""
    need = min_windows_back * WINDOW
    eligible = 0
    for k in range(records.short_min):  # record short_min-1-k has k shorter records after it
        if 1 + k * MIN_RECORD_CHARS + tail_chars >= need:
            eligible += 1
    if eligible < n_queried:
        raise ValueError(f"records.short_min={records.short_min} is too small: fewer than "
                         f"{n_queried} records can sit {min_windows_back} windows back")


@dataclass(frozen=True)
class LookupParams:
    """``testbed_lookup``: records, then one key to find. The queried record ends at
    least ``min_windows_back`` windows before the end of the prompt, chosen uniformly
    among the records that do, so the answer must come through the compressed/indexed
    path, never the window."""

    records: LengthMix
    min_windows_back: int = 3
    value_max: int = 99

    def __post_init__(self) -> None:
        _check_far_enough(self.records, self.min_windows_back, 1,
                          len("What is K7Q?\nAnswer:"))


@dataclass(frozen=True)
class ArithParams:
    """``testbed_arith``: irrelevant filler records, then a chain of ``+``/``-`` on 1-2
    digit operands. The whole question line sits inside the last window; every
    intermediate result stays in ``[0, result_max]`` (no negatives)."""

    filler: LengthMix
    min_ops: int = 2
    max_ops: int = 3
    operand_max: int = 99
    result_max: int = 199

    def __post_init__(self) -> None:
        if not 1 <= self.min_ops <= self.max_ops:
            raise ValueError(f"ArithParams: need 1 <= min_ops <= max_ops: {self}")
        if self.operand_max > self.result_max:
            raise ValueError(f"ArithParams: operand_max must be <= result_max: {self}")


@dataclass(frozen=True)
class LookupArithParams:
    """``testbed_lookup_arith``: records, then ``A+B`` or ``A-B`` over two keys whose
    records both end at least ``min_windows_back`` windows before the prompt's end;
    for ``-`` the larger value comes first (no negatives)."""

    records: LengthMix
    min_windows_back: int = 3
    value_max: int = 99

    def __post_init__(self) -> None:
        _check_far_enough(self.records, self.min_windows_back, 2,
                          len("Compute K7Q+B2C.\nAnswer:"))
