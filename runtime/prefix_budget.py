"""What a fixed prefix-cache budget buys, exact vs bounded replay: the hit rate a
workload reaches when the cache holds as many blocks as the budget pays for.

Bounded replay's point is the cache's cost: a cached token needs only its persistent
KV, so a budget holds many more blocks than in exact mode, which must keep each
block's window state (``KVBytes.prefix_cache_bytes_per_token``). It pays for that
with a replay of W tokens per hit (and ignores hits of at most W tokens). This module
plays a workload through a least-recently-used cache of whole blocks, chained (a block
is found only with every block before it), looked up at most ``len - 1`` tokens deep
(one token is always computed), as ``runtime.engine.prefix_cache`` does, evicting a
prompt's tail blocks before its head, and counts:

- ``hit_tokens``: prompt tokens found in the cache;
- ``saved_tokens``: prefill tokens not computed: the hit in exact mode, H - W after a
  hit of H > W in bounded mode (the replay recomputes W), 0 for H <= W.

Pure Python (no torch), so ``v41val`` and the benchmarks can run it on any prompts.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class BudgetResult:
    mode: str  # "exact" | "bounded"
    budget_bytes: float
    bytes_per_token: float
    capacity_blocks: int
    prompt_tokens: int
    hit_tokens: int
    saved_tokens: int

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def saved_rate(self) -> float:
        return self.saved_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def to_dict(self) -> dict:
        return {"mode": self.mode, "budget_bytes": self.budget_bytes,
                "bytes_per_token": self.bytes_per_token,
                "capacity_blocks": self.capacity_blocks, "prompt_tokens": self.prompt_tokens,
                "hit_tokens": self.hit_tokens, "saved_tokens": self.saved_tokens,
                "hit_rate": self.hit_rate, "saved_rate": self.saved_rate}


def play(prompts: Sequence[Sequence[int]], block_tokens: int, capacity_blocks: int,
         replay_window: int | None) -> tuple[int, int, int]:
    """(prompt tokens, hit tokens, saved tokens) of ``prompts`` in order through an LRU
    of ``capacity_blocks`` blocks; ``replay_window`` W for bounded mode, None for exact."""
    cache: OrderedDict[tuple, None] = OrderedDict()
    total = hits = saved = 0
    for prompt in prompts:
        tokens = tuple(prompt)
        total += len(tokens)
        hit = 0
        while hit + block_tokens <= len(tokens) - 1 and tokens[:hit + block_tokens] in cache:
            hit += block_tokens
        if replay_window is None:
            saved += hit
        elif hit > replay_window:
            saved += hit - replay_window
        hits += hit
        # touched tail first, so a prompt's first blocks (the prefix others share) are
        # the most recent and its tail is evicted first, as vLLM frees blocks
        for end in range(len(tokens) // block_tokens * block_tokens, 0, -block_tokens):
            key = tokens[:end]
            cache[key] = None
            cache.move_to_end(key)
        while len(cache) > capacity_blocks:
            cache.popitem(last=False)
    return total, hits, saved


def budget_hit_rates(prompts: Sequence[Sequence[int]], kv, budget_bytes: float,
                     block_tokens: int) -> tuple[BudgetResult, BudgetResult]:
    """(exact, bounded) results of ``prompts`` under one budget; ``kv`` is the model's
    ``runtime.kv_bytes.KVBytes``."""
    out = []
    for mode in ("exact", "bounded"):
        per_token = kv.prefix_cache_bytes_per_token(mode == "exact", block_tokens)
        capacity = int(budget_bytes // (per_token * block_tokens))
        total, hits, saved = play(prompts, block_tokens, capacity,
                                  None if mode == "exact" else kv.sliding_window)
        out.append(BudgetResult(mode, float(budget_bytes), per_token, capacity, total, hits,
                                saved))
    return out[0], out[1]
