"""runtime.batched.prefill: the fixed-shape prefill with decoder trim, in two segments.

The reference is the engine (``V41Model``) on cold requests with ``logits="last"``:
``swa="bounded", decoder_trim=True`` for the trimmed prefill and ``swa="exact"`` for the
untrimmed one. As in test_batched_forward.py, the whole-model comparison runs the
batched form in row-invariant mode against the engine's ``batch_invariant=True`` (the
model's FP8/NVFP4/MXFP4 roundings turn a last-bit layout difference into a whole step,
so only the same reduction order can be compared to 1e-5); the fast form's one
layout-specific op on trimmed rows, the blocked window attention, is held to the
engine's attention op by op with the trimmed positions and floor.
"""

from __future__ import annotations

import functools

import pytest
import torch

from runtime.attention import sparse_attention as engine_attention
from runtime.batched.attention import sparse_attention
from runtime.batched.graphs import CapturedPrefill
from runtime.batched.indexer import select
from runtime.batched.prefill import BatchedPrefill
from runtime.config import V41Config
from runtime.errors import ConfigError
from runtime.model import SeqChunk, V41Model
from runtime.numerics import Numerics
from runtime.options import RuntimeOptions
from runtime.weights import V41Weights

pytestmark = pytest.mark.usefixtures("one_thread")

REL_TOL = 1e-5
W = 128  # tiny's sliding window


@functools.lru_cache(maxsize=4)
def weights(preset: str = "tiny", seed: int = 0) -> V41Weights:
    return V41Weights.random(V41Config.preset(preset), seed=seed)


def prompts(config: V41Config, batch: int, t: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, config.vocab_size, (batch, t), generator=gen)


def engine_last(w: V41Weights, tokens: torch.Tensor, **options) -> torch.Tensor:
    """The engine's last-position logits of each row of ``tokens`` as a cold request."""
    model = V41Model(w, RuntimeOptions(batch_invariant=True, **options))
    return torch.cat([model.forward([SeqChunk(model.new_state(), row, logits="last")])[0].logits
                      for row in tokens])


def rel_error(got: torch.Tensor, ref: torch.Tensor) -> float:
    return float(((got - ref).abs().amax(-1) / ref.abs().amax(-1)).max())


@pytest.mark.parametrize("cut", ["after", "at"])
@pytest.mark.parametrize("t", [1, 100, W, 300, 4 * W + 5])  # no group yet, T < W, T = W, T > W, several W
def test_trimmed_prefill_equals_engine_decoder_trim(cut, t):
    w = weights()
    tokens = prompts(w.config, 2, t, seed=t)
    got = BatchedPrefill(w, trim=True, cut=cut, row_invariant=True)(tokens)
    ref = engine_last(w, tokens, swa="bounded", decoder_trim=True, cut=cut)
    assert got.shape == (2, w.config.vocab_size) and got.dtype == torch.float32
    assert rel_error(got, ref) <= REL_TOL


@pytest.mark.parametrize(("cut", "t"), [("after", 100), ("at", 300), ("after", 4 * W + 5)])
def test_untrimmed_prefill_equals_engine_exact(cut, t):
    w = weights()
    tokens = prompts(w.config, 2, t, seed=t + 1)
    got = BatchedPrefill(w, trim=False, cut=cut, row_invariant=True)(tokens)
    assert rel_error(got, engine_last(w, tokens, swa="exact")) <= REL_TOL
    if t > W:  # the trim changes the numbers there, so the two comparisons are not one
        trimmed = BatchedPrefill(w, trim=True, cut=cut, row_invariant=True)(tokens)
        assert rel_error(trimmed, got) > 1e-3


@pytest.mark.parametrize("replay", [64, 200])  # W of the trim below and above the attention window
def test_trim_window_other_than_the_attention_window(replay):
    w = weights()
    tokens = prompts(w.config, 1, 300, seed=replay)
    got = BatchedPrefill(w, trim=True, replay_tokens=replay, row_invariant=True)(tokens)
    ref = engine_last(w, tokens, swa="bounded", decoder_trim=True, replay_tokens=replay)
    assert rel_error(got, ref) <= REL_TOL


@pytest.mark.parametrize(("t", "keep", "window"), [(300, 128, 128), (300, 64, 128), (300, 200, 128), (90, 90, 32)])
def test_fast_window_attention_on_kept_rows_equals_engine(t, keep, window):
    """The fast form's attention on the last ``keep`` rows, as a sequence of its own,
    equals the engine's attention at the true positions with the floor at T - keep."""
    gen = torch.Generator().manual_seed(keep)
    b, heads, hd, n, k = 2, 4, 64, t // 2, 8
    start = t - keep
    q = torch.randn(b, keep, heads, hd, generator=gen)
    kv = torch.randn(b, keep, hd, generator=gen)
    sink = torch.randn(heads, generator=gen)
    entries = torch.randn(b, n, hd, generator=gen)
    topk = torch.full((b, keep, k), -1, dtype=torch.int64)
    for i in range(b):
        for r in range(keep):
            visible = (start + r + 1) // 2
            ids = torch.randperm(visible, generator=gen)[: min(k, visible)].sort().values
            topk[i, r, : ids.numel()] = ids
    out, _ = sparse_attention(q, kv, window, entries, topk, sink)
    positions = torch.arange(start, t)
    swa = torch.full((b, t, hd), float("nan"))  # never computed below the floor, as in the engine
    swa[:, start:] = kv
    for i in range(b):
        ref = engine_attention(q[i], positions, torch.full_like(positions, start), swa[i], window, entries[i],
                               topk[i], sink, Numerics())
        assert (out[i] - ref).abs().max() <= 1e-6 * ref.abs().max()


def test_selection_of_kept_rows_equals_the_full_selection_cut():
    """Top-k and candidate blocks of rows start .. T-1 scored on their own equal those
    rows of the full selection (visible counts from the true positions)."""
    c = weights().config
    gen = torch.Generator().manual_seed(3)
    b, t, start, ratio, n_heads, dim = 2, 300, 172, 2, c.index_n_heads, c.index_head_dim
    q = torch.randn(b, t, n_heads, dim, generator=gen)
    head_w = torch.randn(b, t, n_heads, generator=gen)
    keys = torch.randn(b, t // ratio, dim, generator=gen)
    source = c.candidate_source_layer_id
    full_topk, full_blocks = select(q, head_w, keys, ratio, source, None, c, Numerics())
    topk, blocks = select(q[:, start:], head_w[:, start:], keys, ratio, source, None, c, Numerics(), start=start)
    assert torch.equal(topk, full_topk[:, start:])
    assert torch.equal(blocks, full_blocks.reshape(b, t, -1)[:, start:].reshape(b * (t - start), -1))
    later = c.index_source_layer_ids[-1]
    full_re, _ = select(q, head_w, keys, ratio, later, full_blocks, c, Numerics())
    re, _ = select(q[:, start:], head_w[:, start:], keys, ratio, later, blocks, c, Numerics(), start=start)
    assert torch.equal(re, full_re[:, start:])


def test_the_decoder_leaves_the_encoder_output_as_it_was():
    """A captured decoder replays on the same ``Encoded``: calling it twice must give the
    same logits (the decoder's index sources must not overwrite the encoder's top-k)."""
    w = weights()
    prefill = BatchedPrefill(w, trim=True)
    enc = prefill.encoder(prompts(w.config, 1, 300, seed=9))
    before = [x.clone() for x in enc.tensors()]
    first = prefill.decoder(enc)
    assert torch.equal(prefill.decoder(enc), first)
    assert all(torch.equal(a, b) for a, b in zip(before, enc.tensors(), strict=True))


class HostSync(AssertionError):
    pass


def forbid_host_syncs(monkeypatch) -> None:
    """Every Python-level way a tensor's value reaches the host (or decides a shape)
    raises: .item(), .tolist(), int/float/bool/index conversion, nonzero, boolean-mask
    indexing."""
    def refuse(name):
        def raiser(*_args, **_kwargs):
            raise HostSync(name)
        return raiser

    for name in ("item", "tolist", "__int__", "__float__", "__bool__", "__index__", "nonzero", "unique",
                 "masked_select"):
        monkeypatch.setattr(torch.Tensor, name, refuse(name))
    for name in ("nonzero", "unique", "masked_select", "where_one_arg"):
        if hasattr(torch, name):
            monkeypatch.setattr(torch, name, refuse(f"torch.{name}"))
    getitem = torch.Tensor.__getitem__

    def checked_getitem(self, index):
        parts = index if isinstance(index, tuple) else (index,)
        if any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts):
            raise HostSync("boolean-mask indexing")
        return getitem(self, index)

    monkeypatch.setattr(torch.Tensor, "__getitem__", checked_getitem)


def test_the_forbidding_catches_a_sync(monkeypatch):
    x = torch.arange(4)
    w = weights()
    parity = BatchedPrefill(w, row_invariant=True)  # the engine's attention layout syncs
    tokens = prompts(w.config, 1, 40, seed=2)
    forbid_host_syncs(monkeypatch)
    for sync in (lambda: x.sum().item(), lambda: bool(x.any()), lambda: x[x > 1], lambda: int(x[0]),
                 lambda: parity(tokens)):
        with pytest.raises(HostSync):
            sync()


@pytest.mark.parametrize(("trim", "cut", "grouped"), [(True, "after", False), (True, "at", True),
                                                     (False, "after", True)])
def test_encoder_and_decoder_never_sync_with_the_host(monkeypatch, trim, cut, grouped):
    w = weights()
    prefill = BatchedPrefill(w, trim=trim, cut=cut, grouped_moe=grouped)
    tokens = prompts(w.config, 2, 300, seed=5)
    expected = prefill(tokens)
    forbid_host_syncs(monkeypatch)
    got = prefill.decoder(prefill.encoder(tokens))
    monkeypatch.undo()
    assert torch.equal(got, expected)


def test_bad_settings_are_one_line_config_errors():
    w = weights()
    with pytest.raises(ConfigError, match="BatchedPrefill.cut"):
        BatchedPrefill(w, cut="middle")
    with pytest.raises(ConfigError, match="replay_tokens"):
        BatchedPrefill(w, replay_tokens=0)
    with pytest.raises(ValueError, match="CUDA graphs need tokens on a CUDA device"):
        CapturedPrefill(BatchedPrefill(w), prompts(w.config, 1, 8, seed=0))
    late = V41Weights.random(w.config.replace(engram_layer_ids=(1, 9)), seed=0)
    with pytest.raises(ConfigError, match="engram layer 9 lies after the cut at layer 7"):
        BatchedPrefill(late)


def test_grouped_moe_equals_dense_in_every_layer_of_both_segments():
    """The grouped experts on each layer's real FFN input (both segments, trimmed rows
    included) equal the dense experts to 1e-5 of the row's largest value. Not the
    whole-model logits: a last-bit difference of the grouped GEMM flips the odd FP8/NVFP4
    rounding of a later layer (test_batched_forward.py's trap); measured on tiny, T=300,
    seed 0: one row equal bit for bit, the other off by 4e-3 of its largest logit."""
    from runtime.batched.moe import dense_moe

    w = weights()
    c = w.config
    tokens = prompts(c, 2, 300, seed=11)
    prefill = BatchedPrefill(w, trim=True, grouped_moe=True)
    grouped = prefill._grouped
    seen = []

    def both(layer, x, ffn):
        out = grouped(layer, x, ffn)
        dense, _ = dense_moe(x, ffn, c, prefill.model.num)
        seen.append((layer, x.shape[0], rel_error(out, dense)))
        return out

    prefill._moe = both
    logits = prefill(tokens)
    cut = prefill.cut_layer
    assert [(layer, rows) for layer, rows, _ in seen] == [(i, 600) for i in range(cut)] + [
        (i, 2 * W) for i in range(cut, c.num_hidden_layers)]
    assert max(err for *_, err in seen) <= REL_TOL
    assert logits.shape == (2, c.vocab_size)


def test_grouped_moe_has_no_row_invariant_form():
    with pytest.raises(ConfigError, match="grouped_moe has no row-invariant form"):
        BatchedPrefill(weights(), grouped_moe=True, row_invariant=True)


@functools.lru_cache(maxsize=1)
def gpu_weights() -> V41Weights:
    return V41Weights.random(V41Config.preset("mid"), seed=0, dtype=torch.bfloat16, device="cuda",
                             draw_on_device=True)


@functools.lru_cache(maxsize=1)
def gpu_stacks() -> list:
    from runtime.grouped_moe import stack_all_layers

    return stack_all_layers(gpu_weights())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize(("trim", "grouped"), [(True, True), (False, True), (True, False)])
def test_captured_segments_replay_bit_for_bit_on_mid(trim, grouped):
    """mid, bf16, T = 1024: both segments captured (``CapturedPrefill``), replayed on the
    captured tokens and on new ones copied into the static input, equal the uncaptured
    calls bit for bit."""
    w = gpu_weights()
    prefill = BatchedPrefill(w, trim=trim, grouped_moe=grouped, stacked=gpu_stacks() if grouped else None)
    gen = torch.Generator(device="cuda").manual_seed(1)
    first, second = (torch.randint(0, w.config.vocab_size, (1, 1024), device="cuda", generator=gen)
                     for _ in range(2))
    graphs = CapturedPrefill(prefill, first)
    for tokens in (first, second):
        logits = graphs(tokens)
        torch.cuda.synchronize()
        eager = prefill(tokens)
        assert logits.shape == (1, w.config.vocab_size)
        assert torch.equal(logits, eager)
    assert not torch.equal(prefill(first), prefill(second))
