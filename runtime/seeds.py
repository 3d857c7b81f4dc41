"""The range of a seed, checked once for every place a user gives one (a plan's seed,
``--seed``, a request's ``seed``): 0 <= seed < 2**63. torch's generators take at most
64 bits, numpy's refuse negatives and SQLite stores 64-bit signed integers, so a seed
outside that range would fail deep inside one of them (an ``OverflowError`` of a whole
batch, a ``ValueError`` with no field named) instead of at the input that carried it.
Light: no torch."""

from __future__ import annotations

from runtime.errors import ConfigError

SEED_LIMIT = 2**63  # exclusive; request i of a batch seeded s gets s + i, far below it


def check_seed(value: object, field: str) -> int:
    """``value`` as a seed, or a ``ConfigError`` naming ``field`` and the range."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < SEED_LIMIT:
        raise ConfigError(f"{field}: expected an integer in [0, 2**63), got {value!r}")
    return value
