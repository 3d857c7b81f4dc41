"""Keys, values and the record block shared by all testbed tasks.

Every item's question opens with a ``Records:`` block, one ``KEY=VALUE`` line per
record: a key is an uppercase letter, a digit and an uppercase letter ("K7Q"), a
value a decimal integer. The block is the long-range material of the lookup tasks
and irrelevant filler in ``testbed_arith``; one rigid layout for all three keeps the
tiny model's job to learning the task, not the format.
"""

from __future__ import annotations

import random
import re
from string import ascii_uppercase, digits

RECORDS_HEADER = "Records:\n"
RECORD_RE = re.compile(r"([A-Z][0-9][A-Z])=([0-9]+)")

ALL_KEYS = tuple(a + d + b for a in ascii_uppercase for d in digits for b in ascii_uppercase)


def keys_in(text: str) -> frozenset[str]:
    """Every key that a ``KEY=VALUE`` record in ``text`` defines."""
    return frozenset(m.group(1) for m in RECORD_RE.finditer(text))


class RecordDrawer:
    """Draws records with distinct keys from ``ALL_KEYS`` minus ``reserved`` (the keys
    of the few-shot prefix, so an item never redefines a key the prefix already
    answered: no ambiguity about which record is meant)."""

    def __init__(self, reserved: frozenset[str], value_max: int) -> None:
        self.keys = tuple(k for k in ALL_KEYS if k not in reserved)
        self.values = tuple(str(v) for v in range(value_max + 1))

    def draw(self, rng: random.Random, n: int) -> tuple[list[str], list[str]]:
        """``n`` distinct keys and their values (as decimal strings)."""
        return rng.sample(self.keys, n), rng.choices(self.values, k=n)


def record_lines(keys: list[str], values: list[str]) -> list[str]:
    return [f"{k}={v}\n" for k, v in zip(keys, values, strict=True)]


def far_indices(lines: list[str], tail_chars: int, min_distance: int) -> int:
    """How many leading records end at least ``min_distance`` tokens (= bytes) before
    the end of the prompt, given the ``tail_chars`` that follow the last record line.
    A record's distance counts from just after its value's last digit (its ``\\n``,
    the later records and the tail come after). The eligible records are always a
    prefix of the list, so the count is all a caller needs."""
    after = tail_chars
    for i in range(len(lines) - 1, -1, -1):
        if after + 1 >= min_distance:  # +1: this record's own "\n"
            return i + 1
        after += len(lines[i])
    return 0
