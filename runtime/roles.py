"""CED layer roles: what each layer owns and reads, and which layers decoder trim skips.

- kv_source: owns a compressor; publishes global KV + indexer keys for its group;
- index mode "full" (a KV source scoring its own keys), "reindex" (its own queries
  against its KV source's keys, inside the candidate blocks), "reuse" (the latest
  published top-k), or None (ratio 0: window only);
- trimmed: runs only on the kept rows of a trimmed prefill (given the cut).
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.config import V41Config


@dataclass(frozen=True)
class LayerRole:
    layer: int
    ratio: int
    kv_source: int | None  # the layer whose global KV this layer reads
    is_kv_source: bool
    index_mode: str | None  # "full" | "reindex" | "reuse" | None
    index_source: int | None  # the layer whose top-k this layer uses
    candidate_source: bool
    engram: bool
    trimmed: bool


def first_trimmed_layer(config: V41Config, cut: str) -> int | None:
    """The first layer decoder trim runs on kept rows only ("after": last KV source + 1,
    as vLLM; "at": the last KV source itself, as the paper). None: nothing to trim."""
    last = config.last_kv_source
    first = last + 1 if cut == "after" else last
    if last < 0 or first >= config.num_hidden_layers:
        return None
    return first


def layer_roles(config: V41Config, cut: str = "after") -> list[LayerRole]:
    first = first_trimmed_layer(config, cut)
    roles = []
    for i in range(config.num_hidden_layers):
        ratio = config.compress_ratios[i]
        mode = None
        if ratio:
            if i in config.kv_source_layer_ids:
                mode = "full"
            elif i in config.index_source_layer_ids:
                mode = "reindex"
            else:
                mode = "reuse"
        roles.append(LayerRole(
            layer=i, ratio=ratio, kv_source=config.kv_source_of(i), is_kv_source=i in config.kv_source_layer_ids,
            index_mode=mode, index_source=config.index_source_of(i),
            candidate_source=i == config.candidate_source_layer_id, engram=i in config.engram_layer_ids,
            trimmed=first is not None and i >= first,
        ))
    return roles


def ideal_trim_speedup(config: V41Config, cut: str = "after") -> float:
    """All layers / layers that still run on every prompt token (the long-prompt limit)."""
    first = first_trimmed_layer(config, cut)
    n = config.num_hidden_layers
    return n / (first if first is not None else n)
