"""The scheduling settings of one runtime engine: the one place they are declared.

``runtime.engine.Engine`` reads them; the builtin engine of a plan
(``validate.engines.builtin``), ``v41val serve`` and the lm-eval model compose one
``EngineConfig`` each instead of copying its fields, so they share one set of defaults
(a prefix cache of 256 snapshots everywhere). No torch import: command-line modules
may build one cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.engine.errors import EngineError
from runtime.seeds import check_seed


@dataclass(frozen=True)
class EngineConfig:
    """Scheduling knobs.

    prefill_chunk_tokens: longest prompt chunk one request feeds per step.
    max_batch_requests: requests in flight at once (the rest wait, in order).
    prefix_block_tokens: block size of the prefix cache's hashes; cached prefixes are
        whole blocks.
    prefix_cache_entries: LRU bound on cached snapshots (0 turns the cache off); warm
        mode needs room for every primed prompt's blocks.
    seed: base seed for sampled requests without their own (request i gets seed + i).
    """

    prefill_chunk_tokens: int = 256
    max_batch_requests: int = 8
    prefix_block_tokens: int = 64
    prefix_cache_entries: int = 256
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("prefill_chunk_tokens", "max_batch_requests", "prefix_block_tokens"):
            if getattr(self, name) < 1:
                raise EngineError(f"EngineConfig.{name}: expected >= 1, got {getattr(self, name)}")
        check_seed(self.seed, "EngineConfig.seed")
        if self.prefix_cache_entries < 0:
            raise EngineError(f"EngineConfig.prefix_cache_entries: expected >= 0, got {self.prefix_cache_entries}")
