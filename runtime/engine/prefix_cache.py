"""Prefix cache: model snapshots keyed by chained hashes of fixed-size token blocks.

Why chained hashes: the key of the first k blocks is h_k = H(h_{k-1} || block_k), so
one key names a whole prefix, two prompts share a key exactly when they share those
k * B tokens, and a lookup walks the prompt's keys from the longest candidate down.
The cache stores whatever the model's ``state.export_prefix(n)`` returns (a
``PrefixSnapshot``) and never looks inside it. It is bounded by an entry count with
least-recently-used eviction.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch


def block_hashes(tokens: Sequence[int], block_tokens: int) -> list[bytes]:
    """Chained hashes of the complete blocks of ``tokens``: entry k covers tokens
    [0, (k+1) * block_tokens)."""
    out: list[bytes] = []
    prev = b"v41val-prefix-v1"
    ids = torch.as_tensor(list(tokens), dtype=torch.int64)
    for k in range(len(ids) // block_tokens):
        block = ids[k * block_tokens:(k + 1) * block_tokens].numpy().tobytes()
        prev = hashlib.blake2b(prev + block, digest_size=16).digest()
        out.append(prev)
    return out


@dataclass(frozen=True)
class PrefixHit:
    tokens: int  # length of the cached prefix
    snapshot: Any


class PrefixCache:
    """LRU map: chained block hash -> (prefix length, snapshot)."""

    def __init__(self, block_tokens: int, capacity: int) -> None:
        if block_tokens < 1:
            raise ValueError(f"prefix cache block_tokens must be >= 1, got {block_tokens}")
        self.block_tokens = block_tokens
        self.capacity = capacity
        self._entries: OrderedDict[bytes, tuple[int, Any]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def enabled(self) -> bool:
        return self.capacity > 0

    def lookup(self, tokens: Sequence[int], max_tokens: int) -> PrefixHit | None:
        """The longest cached prefix of ``tokens`` with at most ``max_tokens`` tokens."""
        if not self.enabled:
            return None
        hashes = block_hashes(tokens[:max_tokens], self.block_tokens)
        for k in range(len(hashes) - 1, -1, -1):
            entry = self._entries.get(hashes[k])
            if entry is not None:
                self._entries.move_to_end(hashes[k])
                self.hits += 1
                return PrefixHit(tokens=entry[0], snapshot=entry[1])
        self.misses += 1
        return None

    def contains(self, tokens: Sequence[int]) -> bool:
        """Whether exactly this block-aligned prefix is cached."""
        if len(tokens) % self.block_tokens or not tokens:
            return False
        return block_hashes(tokens, self.block_tokens)[-1] in self._entries

    def store(self, tokens: Sequence[int], snapshot: Any) -> None:
        """Cache ``snapshot`` as the state after ``tokens`` (a whole number of blocks)."""
        if not self.enabled:
            return
        n = len(tokens)
        if n == 0 or n % self.block_tokens:
            raise ValueError(f"prefix cache: {n} tokens is not a whole number of {self.block_tokens}-token blocks")
        key = block_hashes(tokens, self.block_tokens)[-1]
        self._entries[key] = (n, snapshot)
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()
