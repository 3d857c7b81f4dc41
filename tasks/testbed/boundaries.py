"""The runtime's structural boundaries that the probe tasks place items at.

``tasks`` may not import ``runtime`` (the import contract), so the numbers are
restated here; ``tests/tasks/test_probes.py`` asserts each one against the runtime's
own value (``testbed_config()``, ``EngineConfig()``), so they cannot drift apart.

Warm mode (``validate/engines/builtin.py``) primes every prompt; a prefill stores a
prefix-cache snapshot at each chunk end and at the prompt's last whole block, when
that position is a whole number of blocks (``runtime/engine/engine.py``). The measured
pass then looks up the longest cached prefix of at most n - 1 tokens, so for a prompt
of n tokens that is not a multiple of the block the hit is H = floor(n / B) * B; for
one that is, its own last block is out of reach and H falls back to the last chunk
end before it (no other probe prompt shares that much of it).
"""

from __future__ import annotations

WINDOW = 32            # testbed sliding_window (runtime/presets.py testbed_config)
COMPRESS_RATIOS = (0, 2, 1, 1)  # per layer; the ratio-2 source groups token pairs
PREFIX_BLOCK = 64      # EngineConfig.prefix_block_tokens: hits are whole blocks
PREFILL_CHUNK = 256    # EngineConfig.prefill_chunk_tokens: chunk ends at multiples of it


def warm_hit(n_tokens: int) -> int:
    """H, the prefix-cache hit a primed prompt of ``n_tokens`` gets in warm mode (see
    the module doc), before the variant decides whether to take it (bounded replay
    ignores H <= W; exact SWA ignores a snapshot with window holes)."""
    if n_tokens % PREFIX_BLOCK:
        return n_tokens // PREFIX_BLOCK * PREFIX_BLOCK
    return (n_tokens - 1) // PREFILL_CHUNK * PREFILL_CHUNK
