"""LayerSubset: the kept layers keep their flash roles, the index fields stay consistent,
Engram tables shrink in rows only, and bad requests are one-line ConfigErrors."""

from __future__ import annotations

import pytest
import sympy  # a dependency of torch: an independent source of primes

from runtime.config import V41Config, engram_table_sizes
from runtime.errors import ConfigError
from runtime.layer_subset import LayerSubset
from runtime.roles import layer_roles

FLASH = V41Config.preset("flash")


def role_kinds(config: V41Config, cut_ids) -> list[tuple]:
    """Each layer's role with layer ids spelled in ``cut_ids`` (new id -> base id)."""
    name = (lambda i: None if i is None else cut_ids[i]) if cut_ids else (lambda i: i)
    return [(name(r.layer), r.ratio, name(r.kv_source), r.is_kv_source, r.index_mode, name(r.index_source),
             r.candidate_source, r.engram) for r in layer_roles(config)]


@pytest.mark.parametrize("keep", [(1, 14, 20, 24), (1, 14), (1, 2, 3, 20, 21, 24, 25), (0,), (20, 24, 27)])
def test_kept_layers_keep_their_flash_roles(keep):
    reduced = LayerSubset(keep).apply(FLASH)
    full = {r[0]: r for r in role_kinds(FLASH, None)}
    assert role_kinds(reduced, keep) == [full[i] for i in keep]
    assert reduced.num_hidden_layers == len(keep) == len(reduced.compress_ratios)
    # Everything that is not per-layer is the release's.
    same = ("hidden_size", "num_attention_heads", "head_dim", "n_routed_experts", "moe_intermediate_size",
            "index_topk", "candidate_topk_blocks", "vocab_size", "engram_compressed_vocab_size",
            "engram_head_dim", "engram_n_heads", "engram_max_ngram_size", "engram_vocab_size")
    assert all(getattr(reduced, f) == getattr(FLASH, f) for f in same)


def test_the_flash_forward_layers():
    reduced = LayerSubset((1, 14, 20, 24), engram_vocab_size=350_000).apply(FLASH)
    assert reduced.compress_ratios == (0, 2, 1, 1)
    assert reduced.kv_source_layer_ids == (1, 2) and reduced.index_source_layer_ids == (1, 2, 3)
    assert reduced.candidate_source_layer_id == 2 and reduced.engram_layer_ids == (0, 1)
    assert sorted({r.index_mode for r in layer_roles(reduced)}, key=str) == [None, "full", "reindex"]
    # Rows only: 24 buckets per table (3 n-gram sizes x 8 heads), the first 48 primes from
    # 350,000 on (sympy), > 2^31 values per table.
    primes = list(sympy.primerange(350_000, 360_000))[:48]
    assert reduced.engram_num_embeddings == (sum(primes[:24]), sum(primes[24:])) == (8_404_462, 8_413_084)
    assert all(rows * reduced.engram_head_dim > 2**31 for rows in reduced.engram_num_embeddings)


def test_table_sizes_follow_the_kept_engram_layers():
    # Layer 14 alone is the first Engram layer, so it takes the first primes: the size the
    # release gives layer 1, not its own (the hasher indexes with the reduced config's primes).
    only_14 = LayerSubset((14,)).apply(FLASH)
    assert only_14.engram_layer_ids == (0,) and only_14.engram_num_embeddings == (384_006_168,)
    assert only_14.engram_num_embeddings == engram_table_sizes(only_14)
    none = LayerSubset((20, 24)).apply(FLASH)
    assert none.engram_layer_ids == () and none.engram_num_embeddings == ()


def test_an_unused_candidate_source_is_dropped_to_none():
    assert LayerSubset((1, 14)).apply(FLASH).candidate_source_layer_id == -1


def test_a_candidate_source_that_is_not_a_kv_source():
    # tiny with candidates from layer 8 (which re-indexes KV source 6): layer 10 needs 8.
    base = V41Config.preset("tiny").replace(candidate_source_layer_id=8)
    kept = LayerSubset((6, 8, 10)).apply(base)
    assert kept.candidate_source_layer_id == 1 and kept.index_source_layer_ids == (0, 1, 2)
    with pytest.raises(ConfigError, match="layer 10 re-indexes inside the candidate blocks of layer 8"):
        LayerSubset((6, 10)).apply(base)


@pytest.mark.parametrize(("subset", "message"), [
    (dict(layers=()), "layers: expected a non-empty list of layer ids, got ()"),
    (dict(layers=(1, "2")), "layers: expected a non-empty list of layer ids"),
    (dict(layers=(14, 1)), r"layers: \[14, 1\] must be strictly increasing"),
    (dict(layers=(1, 1, 2)), r"layers: \[1, 1, 2\] must be strictly increasing"),
    (dict(layers=(1, 40)), r"layers: \[1, 40\] has a layer outside \[0, 40\)"),
    (dict(layers=(-1, 2)), r"layers: \[-1, 2\] has a layer outside \[0, 40\)"),
    (dict(layers=(1, 3)), "layers: layer 3 reads the compressed KV of layer 2, which is not kept"),
    (dict(layers=(20, 25)), "layers: layer 25 uses the top-k of index source 24, which is not kept"),
    (dict(layers=(24,)), "layers: layer 24 reads the compressed KV of layer 20, which is not kept"),
    (dict(layers=(1,), engram_vocab_size=1), "engram_vocab_size: expected an integer >= 2"),
    (dict(layers=(20, 24), engram_vocab_size=1000), r"engram_vocab_size: none of layers \[20, 24\] is an Engram"),
])
def test_bad_requests_are_one_line_config_errors(subset, message):
    with pytest.raises(ConfigError, match=message) as info:
        LayerSubset(**subset).apply(FLASH)
    assert "\n" not in str(info.value)
