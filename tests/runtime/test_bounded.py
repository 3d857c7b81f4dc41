"""Bounded replay (encoder side) and decoder trim behave exactly as docs/model.md §3 says.

Uses the 8-layer minimal variant with a test-only window of 16 (docs/model.md §7a), on the
batch-invariant path so "identical" can be asserted bit for bit.
"""

from __future__ import annotations

import functools

import pytest
import torch

from runtime.config import V41Config
from runtime.errors import ConfigError, StateError
from runtime.model import SeqChunk, V41Model
from runtime.options import RuntimeOptions
from runtime.weights import V41Weights

W = 16


pytestmark = pytest.mark.usefixtures("one_thread")


@functools.lru_cache(maxsize=1)
def weights() -> V41Weights:
    cfg = V41Config.preset("tiny").replace(
        num_hidden_layers=8, compress_ratios=(0, 0, 2, 2, 2, 1, 1, 1), kv_source_layer_ids=(2, 5),
        index_source_layer_ids=(2, 5, 6), candidate_source_layer_id=5, engram_layer_ids=(1, 3),
        sliding_window=W, index_topk=8, candidate_topk_blocks=4, candidate_block_size=4,
    )
    return V41Weights.random(cfg, seed=3)


def model(**opts) -> V41Model:
    return V41Model(weights(), RuntimeOptions(batch_invariant=True, **opts))


def prompt(n: int, seed: int = 5) -> torch.Tensor:
    return torch.randint(0, 512, (n,), generator=torch.Generator().manual_seed(seed))


def cold(m: V41Model, tokens: torch.Tensor, logits: str = "last"):
    st = m.new_state()
    return st, m.forward([SeqChunk(st, tokens, logits)])[0].logits


def after_hit(m: V41Model, donor_model: V41Model, tokens: torch.Tensor, hit: int):
    donor = donor_model.new_state()
    donor_model.forward([SeqChunk(donor, tokens[:hit])])
    snap = donor.export_prefix(hit)
    st = m.new_state(snap)
    feed = st.tokens_to_feed_after_hit(tokens)
    return st, snap, feed, m.forward([SeqChunk(st, feed)])[0].logits


def test_prompt_within_window_is_identical_to_exact():
    tokens = prompt(W)
    _, exact = cold(model(swa="exact"), tokens)
    for cut in ("after", "at"):
        _, bounded = cold(model(swa="bounded", cut=cut), tokens)
        assert torch.equal(exact, bounded)


def test_hit_within_window_is_ignored_and_identical():
    bounded = model(swa="bounded")
    tokens = prompt(40)
    st, _, feed, logits = after_hit(bounded, bounded, tokens, hit=W)
    assert st.hit_tokens == 0 and len(feed) == 40  # the hit was not adopted
    _, reference = cold(bounded, tokens)
    assert torch.equal(logits, reference)


def test_encoder_replay_beyond_window_changes_only_what_the_spec_says():
    exact, replay = model(swa="exact"), model(swa="bounded", decoder_trim=False)
    tokens, hit = prompt(64), 40
    st, snap, feed, logits = after_hit(replay, exact, tokens, hit)
    ref_state, ref_logits = cold(exact, tokens)
    assert st.hit_tokens == hit and len(feed) == 64 - (hit - W)
    # Layer-0 window KV depends only on the token: the replayed rows equal the cold run's.
    lo = hit - W
    assert torch.equal(st.swa[0][lo:64], ref_state.swa[0][lo:64])
    # Deeper layers saw a window truncated at H-W: their replayed KV differs somewhere.
    assert not torch.equal(st.swa[1][lo:hit], ref_state.swa[1][lo:hit])
    # Global KV and indexer keys of the cached prefix are never rewritten.
    for src, entries in snap.global_kv.items():
        n = entries.shape[0]
        assert torch.equal(st.global_kv[src][:n], entries)
        assert torch.equal(st.index_keys[src][:n], snap.index_keys[src])
        assert torch.equal(entries, ref_state.global_kv[src][:n])
    assert not torch.equal(logits, ref_logits)
    # The same hit in exact mode is bit-identical to cold.
    _, _, _, exact_logits = after_hit(exact, exact, tokens, hit)
    assert torch.equal(exact_logits, ref_logits)


def last_decoder_layers(m: V41Model) -> int:
    return m.config.num_hidden_layers - m.cut_layer


@pytest.mark.parametrize("cut", ["after", "at"])
def test_decoder_trim_with_halo_matches_full_prefill(cut):
    tokens = prompt(100)
    _, full = cold(model(swa="exact"), tokens)
    n_dec = last_decoder_layers(model(decoder_trim=True, cut=cut))
    halo = n_dec * (W - 1) + 1
    _, with_halo = cold(model(decoder_trim=True, cut=cut, replay_tokens=halo), tokens)
    assert torch.equal(with_halo, full)
    # vLLM's W-row trim is an approximation: the last token differs from full prefill.
    _, trimmed = cold(model(decoder_trim=True, cut=cut), tokens)
    assert not torch.equal(trimmed, full)


@pytest.mark.parametrize("cut", ["after", "at"])
def test_trim_leaves_encoder_layers_and_all_logits_chunks_alone(cut):
    tokens = prompt(60)
    exact_state, _ = cold(model(swa="exact"), tokens)
    trim = model(decoder_trim=True, cut=cut)
    st, _ = cold(trim, tokens)
    for layer in range(trim.cut_layer):
        assert torch.equal(st.swa[layer][:60], exact_state.swa[layer][:60])
    for src in trim.config.kv_source_layer_ids:
        assert torch.equal(st.global_kv[src], exact_state.global_kv[src])
    # Trimmed layers computed only the last W rows; the rest was never written.
    assert torch.isnan(st.swa[trim.cut_layer][: 60 - W]).all()
    assert not torch.isnan(st.swa[trim.cut_layer][60 - W : 60]).any()
    # A prompt-logprob ("all") chunk keeps all rows: identical to exact.
    _, exact_all = cold(model(swa="exact"), tokens, logits="all")
    _, trim_all = cold(trim, tokens, logits="all")
    assert torch.equal(exact_all, trim_all)
    # A snapshot below the trimmed prefill's kept rows has window holes: exact
    # continuation from it is refused by ignoring the hit (cold state).
    snap = st.export_prefix(20)
    assert not snap.swa_complete and trim.new_state(snap).hit_tokens == 0
    assert st.export_prefix(60).swa_complete


def test_bad_inputs_are_one_line_errors():
    m = model(swa="exact")
    st = m.new_state()
    with pytest.raises(StateError, match="ids must lie"):
        m.forward([SeqChunk(st, torch.tensor([600]))])
    m.forward([SeqChunk(st, prompt(5))])
    m.forward([SeqChunk(st, prompt(2))])
    with pytest.raises(StateError, match="splits a ratio-2 group"):
        st.export_prefix(3)
    with pytest.raises(StateError, match="different config"):
        V41Model(V41Weights.random(V41Config.preset("tiny"), 0)).forward([SeqChunk(st, prompt(1))])
    cfg = weights().config.replace(engram_layer_ids=(1, 6))
    with pytest.raises(ConfigError, match="engram layer 6 lies after the cut"):
        V41Model(V41Weights(cfg, device="meta"), RuntimeOptions(swa="bounded"))
