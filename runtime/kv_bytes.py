"""KV-cache bytes per token, derived from a config and the model's own cache formats.

Why: the cost of V4.1's caches is what bounded replay trades against; the toolkit
states it from the config instead of quoting numbers. At ``flash`` (docs/model.md §4):

- every layer keeps a sliding window of FP8 entries: 512 x e4m3 + 16 x ue8m0 = 528 B;
- every KV source keeps, per compressed entry, an NVFP4 main-KV record
  (512 x e2m1 = 256 B + 32 x e4m3 scales = 288 B) and an MXFP4 indexer key
  (128 x e2m1 = 64 B + 4 x ue8m0 = 68 B): a 356 B global record;
- a ratio-r source writes one record every r tokens, so the persistent KV grows by
  3 x 356/2 + 1 x 356 = 890 B per token.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.config import V41Config


@dataclass(frozen=True)
class CacheFormats:
    """Element and scale sizes of the three cache formats (bits per value, block sizes)."""

    swa_value_bits: int = 8  # e4m3
    swa_scale_block: int = 32  # one ue8m0 byte per 32 channels (RoPE tail included)
    global_value_bits: int = 4  # e2m1 (NVFP4)
    global_scale_block: int = 16  # one e4m3 byte per 16 channels
    index_value_bits: int = 4  # e2m1 (MXFP4)
    index_scale_block: int = 32  # one ue8m0 byte per 32 channels
    scale_bytes: int = 1
    compressor_state_bytes_per_value: int = 4  # float32 running kv + gate score


@dataclass(frozen=True)
class SourceBytes:
    """One KV source's persistent record and its per-token growth."""

    layer: int
    ratio: int
    record_bytes: int  # main KV + indexer key for one compressed entry
    bytes_per_token: float  # record_bytes / ratio


@dataclass(frozen=True)
class KVBytes:
    """Per-token and per-sequence cache bytes of a config."""

    swa_entry_bytes: int  # one token's window entry in one layer
    swa_layers: int
    sliding_window: int
    global_entry_bytes: int  # NVFP4 main-KV record of one compressed entry
    index_entry_bytes: int  # MXFP4 indexer key of one compressed entry
    sources: tuple[SourceBytes, ...]
    persistent_bytes_per_token: float  # sum over sources
    swa_bytes_per_sequence: int  # constant: every layer's full window
    compressor_state_bytes_per_sequence: int  # buffered partial groups (ratio > 1)

    def sequence_bytes(self, n_tokens: int) -> float:
        """Cache bytes one sequence of ``n_tokens`` holds (persistent + window + state)."""
        window_tokens = min(n_tokens, self.sliding_window)
        return (
            self.persistent_bytes_per_token * n_tokens
            + self.swa_layers * window_tokens * self.swa_entry_bytes
            + self.compressor_state_bytes_per_sequence
        )

    def prefix_cache_bytes_per_token(self, exact: bool, block_tokens: int) -> float:
        """Bytes a prefix cache holds per cached token, with blocks of ``block_tokens``.

        Bounded replay keeps only the persistent (global + indexer) KV: after a hit it
        recomputes the last W tokens, so a cached block needs no window state. Exact
        continuation must also keep, for every cached block, every layer's window
        entries of the last min(B, W - 1) tokens before the block's end (what a request
        continuing there reads; ``runtime.state.PrefixSnapshot.swa``), which is the
        cost bounded replay exists to avoid."""
        if block_tokens < 1:
            raise ValueError(f"block_tokens must be >= 1, got {block_tokens}")
        if not exact:
            return self.persistent_bytes_per_token
        window = min(block_tokens, self.sliding_window - 1)
        return (self.persistent_bytes_per_token
                + self.swa_layers * window * self.swa_entry_bytes / block_tokens)

    def as_dict(self) -> dict:
        return {
            "swa_entry_bytes": self.swa_entry_bytes,
            "swa_layers": self.swa_layers,
            "sliding_window": self.sliding_window,
            "global_entry_bytes": self.global_entry_bytes,
            "index_entry_bytes": self.index_entry_bytes,
            "global_record_bytes": self.global_entry_bytes + self.index_entry_bytes,
            "sources": [
                {"layer": s.layer, "ratio": s.ratio, "record_bytes": s.record_bytes,
                 "bytes_per_token": s.bytes_per_token}
                for s in self.sources
            ],
            "persistent_bytes_per_token": self.persistent_bytes_per_token,
            "swa_bytes_per_sequence": self.swa_bytes_per_sequence,
            "compressor_state_bytes_per_sequence": self.compressor_state_bytes_per_sequence,
        }


def _record_bytes(channels: int, value_bits: int, scale_block: int, scale_bytes: int) -> int:
    """Bytes of ``channels`` quantised values plus one scale per block."""
    # values: channels * bits / 8; scales: one per block of channels
    return channels * value_bits // 8 + (channels // scale_block) * scale_bytes


def kv_bytes_per_token(config: V41Config, formats: CacheFormats | None = None) -> KVBytes:
    """The cache byte breakdown of ``config`` (see the module docstring)."""
    f = formats or CacheFormats()
    swa = _record_bytes(config.head_dim, f.swa_value_bits, f.swa_scale_block, f.scale_bytes)
    main = _record_bytes(config.head_dim, f.global_value_bits, f.global_scale_block, f.scale_bytes)
    index = _record_bytes(config.index_head_dim, f.index_value_bits, f.index_scale_block, f.scale_bytes)
    sources = tuple(
        SourceBytes(
            layer=layer,
            ratio=config.compress_ratios[layer],
            record_bytes=main + index,
            bytes_per_token=(main + index) / config.compress_ratios[layer],
        )
        for layer in config.kv_source_layer_ids
    )
    # A ratio-r compressor buffers up to r-1 tokens of (kv, gate score), head_dim each.
    state = sum(
        (s.ratio - 1) * 2 * config.head_dim * f.compressor_state_bytes_per_value for s in sources
    )
    return KVBytes(
        swa_entry_bytes=swa,
        swa_layers=config.num_hidden_layers,
        sliding_window=config.sliding_window,
        global_entry_bytes=main,
        index_entry_bytes=index,
        sources=sources,
        persistent_bytes_per_token=sum(s.bytes_per_token for s in sources),
        swa_bytes_per_sequence=config.num_hidden_layers * config.sliding_window * swa,
        compressor_state_bytes_per_sequence=state,
    )
