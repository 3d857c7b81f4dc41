"""LayerSubset: a config that keeps some layers of a base config, each in the role it had.

Why: the released Flash dimensions do not fit one GPU (a layer's 384 routed experts are
27.2 GB in bf16, the two Engram tables 196 GB; docs/model.md §7c), so a forward at those
dimensions runs on fewer layers. Cutting layers by hand means rewriting five per-layer
fields together (``compress_ratios``, the KV / index source ids, the candidate source,
the Engram layer ids and their table sizes); one of them left stale either fails
V41Config's validation or, worse, passes it with a layer in another role (a compressed
layer reading another source's keys). This is the one place that rewrite is done.

Rules (each broken one is a one-line ConfigError naming ``layers``):

- ``layers``: base layer ids, strictly increasing, inside [0, num_hidden_layers);
- a kept compressed layer keeps its KV source and its index source (else it would read
  another layer's compressed KV or top-k);
- a kept index source that searches inside the candidate blocks keeps the candidate
  source; a dropped candidate source that no kept layer uses becomes -1 (none);
- every kept layer keeps its compress ratio, its index mode (full / reindex / reuse /
  window only) and its Engram.

``engram_vocab_size`` shrinks the Engram tables' row count and nothing else: the bucket
primes start there instead of at the base's value, so each table has about
(n-gram sizes x heads) x engram_vocab_size rows; head dim, heads, n-gram size, pad id and
the compressed vocabulary (hence the compressed-token map and the hash multipliers'
bound) stay. The table sizes are always recomputed from the primes
(``runtime.config.engram_table_sizes``), which is what the hasher indexes with: a base
table size carried over would not match once the layers before it change.

The hash multipliers are seeded by the Engram layer's id in the reduced model
(``runtime/engram.py``), so a kept Engram layer hashes like the reduced model's layer of
that id, not like the base layer it came from.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.config import V41Config
from runtime.errors import ConfigError


@dataclass(frozen=True)
class LayerSubset:
    """Which base layers to keep, and optionally fewer Engram table rows."""

    layers: tuple[int, ...]
    engram_vocab_size: int | None = None

    def __post_init__(self) -> None:
        layers = tuple(self.layers) if isinstance(self.layers, (list, tuple)) else self.layers
        if not isinstance(layers, tuple) or not layers or not all(
                isinstance(i, int) and not isinstance(i, bool) for i in layers):
            raise ConfigError(f"layers: expected a non-empty list of layer ids, got {self.layers!r}")
        if list(layers) != sorted(set(layers)):
            raise ConfigError(f"layers: {list(layers)} must be strictly increasing")
        object.__setattr__(self, "layers", layers)
        rows = self.engram_vocab_size
        if rows is not None and (not isinstance(rows, int) or isinstance(rows, bool) or rows < 2):
            raise ConfigError(f"engram_vocab_size: expected an integer >= 2 (the first bucket "
                              f"prime's base), got {rows!r}")

    def apply(self, base: V41Config) -> V41Config:
        """The reduced config: the kept layers renumbered 0..k-1 in order."""
        keep = self.layers
        n = base.num_hidden_layers
        if keep[0] < 0 or keep[-1] >= n:
            raise ConfigError(f"layers: {list(keep)} has a layer outside [0, {n})")
        kept = set(keep)
        new = {old: i for i, old in enumerate(keep)}
        c = base.candidate_source_layer_id
        for i in keep:
            if base.compress_ratios[i] == 0:
                continue
            for what, src in (("reads the compressed KV of layer", base.kv_source_of(i)),
                              ("uses the top-k of index source", base.index_source_of(i))):
                if src not in kept:
                    raise ConfigError(f"layers: layer {i} {what} {src}, which is not kept")
            if i in base.index_source_layer_ids and 0 <= c < i and c not in kept:
                raise ConfigError(f"layers: layer {i} re-indexes inside the candidate blocks of "
                                  f"layer {c}, which is not kept")
        engram = tuple(new[i] for i in base.engram_layer_ids if i in kept)
        if self.engram_vocab_size is not None and not engram:
            raise ConfigError(f"engram_vocab_size: none of layers {list(keep)} is an Engram layer "
                              f"(engram_layer_ids {list(base.engram_layer_ids)})")
        changes = dict(
            num_hidden_layers=len(keep),
            compress_ratios=tuple(base.compress_ratios[i] for i in keep),
            kv_source_layer_ids=tuple(new[i] for i in base.kv_source_layer_ids if i in kept),
            index_source_layer_ids=tuple(new[i] for i in base.index_source_layer_ids if i in kept),
            candidate_source_layer_id=new.get(c, -1),
            engram_layer_ids=engram,
            engram_vocab_size=self.engram_vocab_size or base.engram_vocab_size,
        )
        return base.replace(**changes)  # no explicit sizes: replace() recomputes the tables
