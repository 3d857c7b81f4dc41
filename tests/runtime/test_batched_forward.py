"""runtime.batched: the batched, differentiable forward against the engine, and its
gradients.

Parity. The engine's exact mode on a cold prefill (``logits="all"``) is the reference.
One measured trap shapes the comparison: on CPU float32 a GEMM or a batched product
gives last-bit different results for a different call shape, and the model's own
roundings (FP8 window KV, NVFP4 entries, MXFP4 index keys) turn a last-bit difference at
a rounding boundary into a whole step (1/16 for FP8) that later layers amplify.
Measured, fast form vs the engine's default path, testbed, prompts of 100/250/384, 8
weight draws: every position before the first rounding that differs agrees to
<= 1.2e-6; from the first differing rounding on, rows reach 5e-4 .. 3e-2 (tiny, with 12
layers and 4x the values per position, differs within its first 20 positions on every
draw). So the comparisons are:
  - row-invariant mode (``BatchedV41(w, row_invariant=True)``: the engine's row tiles and
    its per-request attention layout, i.e. the same reduction order everywhere) vs the
    engine's ``batch_invariant=True``: every rounding decision coincides and the logits
    are equal bit for bit, on testbed and tiny, ragged rows in one batch, any draw;
  - the fast form (what training runs) vs the engine's default path: <= 1e-5 of the
    row's max |logit| at every position before the row's first differing rounding (found
    by comparing the batched FP8/NVFP4/MXFP4 values with the engine's caches; causality
    makes the earlier positions independent of it), on draws where that covers most
    positions; and its attention, the one op whose layout differs, against the engine's
    op by op.
"""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F

from runtime.attention import sparse_attention as engine_attention
from runtime.batched import BatchedOutput, BatchedV41
from runtime.batched.attention import sparse_attention
from runtime.batched.rounding import FORMATS, round_to
from runtime.config import V41Config
from runtime.model import SeqChunk, V41Model
from runtime.numerics import Numerics
from runtime.options import RuntimeOptions
from runtime.weights import V41Weights

pytestmark = pytest.mark.usefixtures("one_thread")

REL_TOL = 1e-5


@functools.lru_cache(maxsize=8)
def weights(preset: str, seed: int) -> V41Weights:
    return V41Weights.random(V41Config.preset(preset), seed=seed)


def ragged_batch(config: V41Config, lengths: list[int], seed: int) -> torch.Tensor:
    """[B, max(lengths)] random tokens; row i is real up to lengths[i], padding after."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, config.vocab_size, (len(lengths), max(lengths)), generator=gen)


def engine_logits(model: V41Model, tokens: torch.Tensor, state=None) -> torch.Tensor:
    state = state if state is not None else model.new_state()
    return model.forward([SeqChunk(state, tokens, logits="all")])[0].logits


def worst_row_error(got: torch.Tensor, ref: torch.Tensor) -> float:
    """max over positions of max |diff| / max |logit| of that position's row."""
    return float(((got - ref).abs().amax(-1) / ref.abs().amax(-1)).max())


def check_parity(preset: str, seed: int, lengths: list[int], bitwise: bool = False) -> None:
    """Row-invariant batched forward of a ragged batch vs the engine, row by row."""
    w = weights(preset, seed)
    tokens = ragged_batch(w.config, lengths, seed + 1)
    with torch.no_grad():
        out = BatchedV41(w, row_invariant=True)(tokens)
    engine = V41Model(w, RuntimeOptions(swa="exact", batch_invariant=True))
    for row, n in enumerate(lengths):
        ref = engine_logits(engine, tokens[row, :n])
        got = out.logits[row, :n]
        if bitwise:
            assert torch.equal(got, ref), f"row {row} (length {n}) differs from the engine"
        assert worst_row_error(got, ref) <= REL_TOL, (row, n)


@pytest.mark.parametrize(("preset", "lengths"), [
    ("testbed", [100, 250, 384]),  # W = 32: 3 .. 12 windows
    ("tiny", [150, 400]),  # W = 128: 1 .. 3 windows, 12 layers
])
def test_row_invariant_mode_equals_engine_bit_for_bit(preset, lengths):
    for seed in (0, 1):
        check_parity(preset, seed, lengths, bitwise=True)


def test_row_invariant_mode_short_prompts():
    """Shorter than a ratio-2 group, than the window, than the top-k (with these row
    counts the tails of vectorised kernels differ: within the bound, not bitwise)."""
    check_parity("testbed", 0, [1, 2, 5, 33, 64])
    check_parity("tiny", 0, [1, 3, 9])


class RoundingRecorder:
    """Records the batched forward's rounded tensors (layer.py and compressor.py) in call
    order: per layer [entries NVFP4, index keys MXFP4] at a KV source, then window KV FP8."""

    def __init__(self, monkeypatch):
        import runtime.batched.compressor as compressor_module
        import runtime.batched.layer as layer_module

        self.values: list[torch.Tensor] = []

        def recording(x, fmt, straight_through):
            y = round_to(x, fmt, straight_through)
            self.values.append(y)
            return y

        monkeypatch.setattr(layer_module, "round_to", recording)
        monkeypatch.setattr(compressor_module, "round_to", recording)

    def first_difference(self, config: V41Config, state, row: int, n: int) -> int:
        """The first position whose logits can see a rounded value that differs from the
        engine's caches (an entry of group g is seen from position ratio*(g+1) - 1 on)."""
        first, i = n, 0
        for layer in range(config.num_hidden_layers):
            if layer in config.kv_source_layer_ids:
                r = config.compress_ratios[layer]
                pairs = ((self.values[i], state.global_kv[layer]), (self.values[i + 1], state.index_keys[layer]))
                for got, want in pairs:
                    groups = (got[row, : n // r] != want).any(-1).nonzero()
                    if len(groups):
                        first = min(first, r * (int(groups[0]) + 1) - 1)
                i += 2
            positions = (self.values[i][row, :n] != state.swa[layer][:n]).any(-1).nonzero()
            if len(positions):
                first = min(first, int(positions[0]))
            i += 1
        assert i == len(self.values)
        return first


def test_fast_form_matches_engine_up_to_the_first_differing_rounding(monkeypatch):
    recorder = RoundingRecorder(monkeypatch)
    lengths = [100, 250, 384]
    seeds = (0, 4, 5, 6)
    covered = 0
    for seed in seeds:
        w = weights("testbed", seed)
        tokens = ragged_batch(w.config, lengths, seed + 1)
        recorder.values.clear()
        with torch.no_grad():
            out = BatchedV41(w)(tokens)
        engine = V41Model(w, RuntimeOptions(swa="exact"))
        for row, n in enumerate(lengths):
            state = engine.new_state()
            ref = engine_logits(engine, tokens[row, :n], state)
            first = recorder.first_difference(w.config, state, row, n)
            if first:
                assert worst_row_error(out.logits[row, :first], ref[:first]) <= REL_TOL, (seed, row, first)
            covered += first
    assert covered >= 0.6 * len(seeds) * sum(lengths)  # measured: 70 % of the positions


@pytest.mark.parametrize(("t", "window", "with_entries"), [(100, 32, True), (64, 16, True), (37, 8, False)])
def test_fast_attention_equals_engine_attention(t, window, with_entries):
    gen = torch.Generator().manual_seed(t)
    b, heads, hd, n, k = 2, 4, 64, t // 2, 8
    q = torch.randn(b, t, heads, hd, generator=gen)
    kv = torch.randn(b, t, hd, generator=gen)
    sink = torch.randn(heads, generator=gen)
    entries = torch.randn(b, n, hd, generator=gen) if with_entries else None
    topk = None
    if with_entries:  # visible ids only (j < (p+1)//2), ascending, -1 padded, like the indexer's
        topk = torch.full((b, t, k), -1, dtype=torch.int64)
        for i in range(b):
            for p in range(t):
                visible = (p + 1) // 2
                ids = torch.randperm(visible, generator=gen)[: min(k, visible)].sort().values
                topk[i, p, : ids.numel()] = ids
    out, p_comp = sparse_attention(q, kv, window, entries, topk, sink)
    positions = torch.arange(t)
    for i in range(b):
        ref = engine_attention(q[i], positions, torch.zeros_like(positions), kv[i], window,
                               None if entries is None else entries[i], None if topk is None else topk[i],
                               sink, Numerics())
        assert (out[i] - ref).abs().max() <= 1e-6 * ref.abs().max()
    if with_entries:
        assert p_comp.shape == (b, t, heads, k)
        assert torch.all(p_comp[(topk < 0)[:, :, None, :].expand_as(p_comp)] == 0)


def test_output_fields_and_padding_rows():
    w = weights("testbed", 0)
    tokens = ragged_batch(w.config, [70, 40], 3)
    with torch.no_grad():
        out = BatchedV41(w)(tokens)
        padded = tokens.clone()
        padded[1, 40:] = 7  # other padding tokens: the real rows must not move
        again = BatchedV41(w)(padded)
    c = w.config
    assert isinstance(out, BatchedOutput)
    assert out.logits.shape == (2, 70, c.vocab_size) and out.logits.dtype == torch.float32
    assert out.indexer_loss.dim() == 0 and torch.isfinite(out.indexer_loss)
    assert out.expert_load.shape == (c.num_hidden_layers, c.n_routed_experts)
    assert torch.allclose(out.expert_load.sum(-1), torch.ones(c.num_hidden_layers))
    assert torch.equal(out.logits[0], again.logits[0])
    assert torch.equal(out.logits[1, :40], again.logits[1, :40])


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_straight_through_rounding_value_and_identity_gradient(fmt):
    gen = torch.Generator().manual_seed(5)
    # values over many binades, exact zeros and block-wise tiny values
    x = torch.randn(64, 64, generator=gen) * torch.logspace(-6, 3, 64)[:, None]
    x[0, :16] = 0.0
    x = x.requires_grad_()
    y = round_to(x, fmt, straight_through=True)
    assert torch.equal(y, FORMATS[fmt](x.detach()))
    upstream = torch.randn(64, 64, generator=gen)
    (y * upstream).sum().backward()
    assert torch.equal(x.grad, upstream)
    assert torch.equal(round_to(x, fmt, straight_through=False), y.detach())


def test_straight_through_and_plain_forwards_give_identical_logits():
    w = weights("testbed", 0)
    tokens = ragged_batch(w.config, [96, 96], 4)
    model = BatchedV41(w)
    with torch.no_grad():
        plain = model(tokens, straight_through=False)
        st = model(tokens, straight_through=True)
    assert torch.equal(plain.logits, st.logits)
    assert torch.equal(plain.indexer_loss, st.indexer_loss)


NOT_GRADIENT_TRAINED = ("ffn.gate.bias",)  # moved by the trainer from expert_load (moe.py)


def test_backward_reaches_every_parameter():
    """Every parameter but the gate bias gets a finite, non-zero gradient. The gate biases
    start at 0 (as in training), so every expert is picked by some of the 256 tokens (an
    expert nobody picks would rightly get none; asserted via expert_load)."""
    w = V41Weights.random(V41Config.preset("testbed"), seed=2)
    for layer in w.layers:
        layer.ffn.gate.bias.data.zero_()
    for p in w.parameters():
        p.requires_grad_(True)
    tokens = ragged_batch(w.config, [128, 128], 6)
    out = BatchedV41(w)(tokens, straight_through=True)
    assert (out.expert_load > 0).all()
    lm = F.cross_entropy(out.logits[:, :-1].reshape(-1, out.logits.shape[-1]), tokens[:, 1:].reshape(-1))
    (lm + out.indexer_loss).backward()
    missing, bad = [], []
    for name, p in w.named_parameters():
        if name.endswith(NOT_GRADIENT_TRAINED):
            assert p.grad is None or not p.grad.any(), name
            continue
        if p.grad is None or not p.grad.any():
            missing.append(name)
        elif not torch.isfinite(p.grad).all():
            bad.append(name)
    assert not missing and not bad, (missing, bad)


def test_indexer_loss_trains_only_the_indexer():
    """The DSA loss reaches the indexer's own weights and nothing of the main model."""
    w = V41Weights.random(V41Config.preset("testbed"), seed=3)
    for p in w.parameters():
        p.requires_grad_(True)
    out = BatchedV41(w)(ragged_batch(w.config, [80], 8), straight_through=True)
    out.indexer_loss.backward()
    reached = {n for n, p in w.named_parameters() if p.grad is not None and p.grad.any()}
    indexer = {n for n, _ in w.named_parameters() if ".attn.indexer." in n}
    assert reached == indexer


def test_plain_forward_passes_no_gradient_through_the_roundings():
    """Without straight-through a rounding has its true derivative (zero): the window KV
    projection then learns nothing, which is why training uses straight_through=True."""
    w = V41Weights.random(V41Config.preset("testbed"), seed=2)
    for p in w.parameters():
        p.requires_grad_(True)
    tokens = ragged_batch(w.config, [64], 9)
    BatchedV41(w)(tokens, straight_through=False).logits.sum().backward()
    assert w.layers[0].attn.wkv.weight.grad is None
    assert w.layers[0].attn.wq_a.weight.grad is not None  # the queries are not rounded


def test_bf16_autocast_keeps_float32_logits():
    w = weights("testbed", 0)
    tokens = ragged_batch(w.config, [96, 96], 10)
    model = BatchedV41(w)
    with torch.no_grad():
        ref = model(tokens).logits
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(tokens)
    assert out.logits.dtype == torch.float32 and torch.isfinite(out.logits).all()
    assert torch.isfinite(out.indexer_loss)
    rel = (out.logits - ref).abs().amax(-1) / ref.abs().amax(-1)
    assert rel.median() < 0.1  # bf16 projections; measured 0.03


def test_one_graph_for_torch_compile():
    """No graph breaks (no host syncs, no data-dependent shapes) under autocast and
    straight-through: torch.compile sees the whole training forward as one graph."""
    import torch._dynamo as dynamo

    w = V41Weights.random(V41Config.preset("testbed"), seed=0)
    for p in w.parameters():
        p.requires_grad_(True)
    model = BatchedV41(w)

    def loss(tokens):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(tokens, straight_through=True)
        return out.logits.float().logsumexp(-1).mean() + out.indexer_loss

    explained = dynamo.explain(loss)(ragged_batch(w.config, [96, 96], 11))
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1


def test_indexer_kl_is_the_dsa_kl():
    """KL(target || softmax(selected scores)), target = head-summed attention mass,
    L1-normalised; empty slots and queries without a selected entry drop out."""
    from runtime.batched.indexer import indexer_kl

    gen = torch.Generator().manual_seed(12)
    topk = torch.tensor([[[0, 3, -1], [-1, -1, -1], [1, 2, 4]]])  # [B=1, T=3, K=3]
    scores = torch.randn(1, 3, 3, generator=gen).masked_fill(topk < 0, float("-inf")).requires_grad_()
    probs = torch.rand(1, 3, 2, 3, generator=gen).masked_fill((topk < 0)[:, :, None, :], 0.0)
    got = indexer_kl(scores, probs, topk)
    want = []
    for t, k in ((0, 2), (2, 3)):
        mass = probs[0, t, :, :k].sum(0)
        target = mass / mass.sum()
        want.append(F.kl_div(torch.log_softmax(scores[0, t, :k], -1), target, reduction="sum"))
    assert torch.allclose(got, torch.stack(want).mean())
    got.backward()
    assert torch.isfinite(scores.grad).all() and scores.grad[0, 1].eq(0).all()
