"""decode = "static" / "graphs" (runtime.static.model.StaticDecodeModel) through the engine,
against the engine's own decode path (decode = "engine") on the same weights.

With batch-invariant numerics every GEMM runs in fixed row tiles on both paths, so a
request's numbers do not depend on how it was batched and the two paths must agree bit for
bit: tokens and every step's logits. The fast numerics are checked to a tolerance."""

from __future__ import annotations

import pytest
import torch

from runtime.build import build_model
from runtime.config import V41Config
from runtime.engine import Engine, EngineConfig
from runtime.engine.requests import GenerateRequest
from runtime.errors import ConfigError
from runtime.numerics import rms_norm
from runtime.options import RuntimeOptions
from runtime.static.model import StaticDecodeModel
from runtime.weights import V41Weights

CFG = V41Config.preset("tiny")
CUDA = torch.cuda.is_available()


@pytest.fixture(scope="module")
def weights():
    return V41Weights.random(CFG, seed=5)


def requests(lengths_and_tokens, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [GenerateRequest(prompt_ids=tuple(torch.randint(0, CFG.vocab_size, (n,), generator=gen).tolist()),
                            max_tokens=m, temperature=0.0, return_logits=True, ignore_eos=True)
            for n, m in lengths_and_tokens]


def generate(weights, options, reqs, max_batch=2, max_len=64):
    """A short slab by default: the static step's indexer cost grows with max_len."""
    model = build_model(weights, options, max_batch=max_batch)
    if isinstance(model, StaticDecodeModel):
        model = StaticDecodeModel(model.model, max_batch=max_batch, max_len=max_len,
                                  graphs=options.decode == "graphs")
    engine = Engine(model, config=EngineConfig(max_batch_requests=max_batch, prefix_block_tokens=16))
    return engine.generate(reqs), model


# Requests that finish at different times (slots freed and reused), more requests than
# slots (queueing) and, last, a repeat of the 40-token prompt (a prefix-cache hit).
MIX = [(5, 4), (40, 2), (17, 5)]


def mix():
    reqs = requests(MIX)
    return reqs + [reqs[1]]


@pytest.mark.parametrize("swa", ["exact", "bounded"])
def test_static_decode_equals_the_engine_bit_for_bit(weights, swa):
    # bounded: replay on a short window so these short prompts hit; no decoder trim (a trim
    # to fewer rows than the attention window leaves window KV the decode step would read
    # uncomputed, which the slab refuses to load).
    opts = dict(swa=swa, batch_invariant=True)
    if swa == "bounded":
        opts.update(replay_tokens=16, decoder_trim=False)
    reqs = mix()
    ref, ref_model = generate(weights, RuntimeOptions(**opts), reqs)
    got, model = generate(weights, RuntimeOptions(decode="static", **opts), reqs)
    for r, g in zip(ref, got, strict=True):
        assert g.token_ids == r.token_ids
        assert torch.equal(g.logits, r.logits)
    decode_steps = sum(len(r.token_ids) - 1 for r in ref)
    assert model.counters.static_decode_tokens == decode_steps
    assert model.counters.static_fallback_tokens == 0
    assert ref_model.counters.static_decode_tokens == 0
    # the repeated prompt hit the prefix cache on both paths (and was replayed with bounded)
    assert model.counters.prefix_hits == ref_model.counters.prefix_hits > 0
    assert model.counters.replayed_tokens == ref_model.counters.replayed_tokens


def test_fast_numerics_agree_to_float_noise(weights):
    """Fast numerics, after the decoder-trimmed prefill of a prompt past the window (its
    trimmed layers' window KV is the last W rows, all the decode reads)."""
    reqs = requests([(9, 6), (180, 4)], seed=3)
    ref, _ = generate(weights, RuntimeOptions(swa="bounded"), reqs)
    got, model = generate(weights, RuntimeOptions(swa="bounded", decode="static"), reqs)
    assert model.counters.trimmed_rows > 0
    for r, g in zip(ref, got, strict=True):
        assert g.token_ids == r.token_ids
        assert float((g.logits - r.logits).abs().max() / r.logits.abs().max()) < 1e-4


def test_the_slab_grows_when_a_request_needs_more_room(weights):
    reqs = requests([(16, 14), (6, 3)], seed=4)
    ref, _ = generate(weights, RuntimeOptions(), reqs)
    model = StaticDecodeModel(build_model(weights, RuntimeOptions(decode="static")).model, max_batch=2,
                              max_len=20)
    stacked = model.decoder.stacked
    got = Engine(model, config=EngineConfig(max_batch_requests=2, prefix_block_tokens=16)).generate(reqs)
    assert model.slab.max_len == 40 and model.counters.static_fallback_tokens == 0
    assert model.decoder.stacked is stacked  # the rebuilt step reused the stacked experts
    for r, g in zip(ref, got, strict=True):
        assert g.token_ids == r.token_ids
        assert float((g.logits - r.logits).abs().max() / r.logits.abs().max()) < 1e-4


def test_a_state_leaving_the_slab_gets_its_caches_back(weights):
    """A state decoded on the slab, then given a multi-token chunk, continues as if the
    engine had decoded it."""
    from runtime.model import SeqChunk

    opts = RuntimeOptions(batch_invariant=True)
    prompt = torch.randint(0, CFG.vocab_size, (21,), generator=torch.Generator().manual_seed(8))
    extra = torch.tensor([3, 1, 4, 1, 5])
    outs = {}
    for decode in ("engine", "static"):
        model = build_model(weights, opts.with_(decode=decode), max_batch=2)
        if decode == "static":
            model = StaticDecodeModel(model.model, max_batch=2, max_len=64)
        st = model.new_state()
        model.forward([SeqChunk(st, prompt)])
        for t in (7, 8, 9):
            model.forward([SeqChunk(st, torch.tensor([t]), decode=True)])
        outs[decode] = model.forward([SeqChunk(st, extra, "all")])[0].logits
        assert st.num_computed == 21 + 3 + 5
    assert torch.equal(outs["static"], outs["engine"])


@pytest.mark.slow
def test_compiled_helpers_agree_with_the_engine(weights):
    """decode_compile (inductor on CPU here): same tokens, logits within float noise."""
    reqs = requests([(9, 5), (30, 4)], seed=6)
    ref, _ = generate(weights, RuntimeOptions(), reqs)
    got, model = generate(weights, RuntimeOptions(decode="static", decode_compile=True), reqs)
    assert model.decoder.fn.rms_norm is not rms_norm  # the compiled wrapper ran
    for r, g in zip(ref, got, strict=True):
        assert g.token_ids == r.token_ids
        assert float((g.logits - r.logits).abs().max() / r.logits.abs().max()) < 1e-4


def test_a_state_the_slab_refuses_decodes_on_the_engine_path(weights):
    """A decoder trim to fewer rows than the window (replay_tokens 16 < W 128, the planted
    break of testbed-gate.toml) leaves window KV the decode reads uncomputed: the slab
    refuses the state, the request decodes on the engine path (same tokens as decode =
    engine), and the counters say the static path did not engage."""
    reqs = requests([(60, 3)], seed=9)
    opts = dict(swa="bounded", replay_tokens=16)
    ref, _ = generate(weights, RuntimeOptions(**opts), reqs)
    got, model = generate(weights, RuntimeOptions(decode="static", **opts), reqs)
    assert got[0].token_ids == ref[0].token_ids
    assert model.counters.trimmed_rows > 0
    assert model.counters.static_decode_tokens == 0
    assert model.counters.static_fallback_tokens == len(ref[0].token_ids) - 1 > 0


def test_graphs_need_cuda(weights):
    if CUDA:
        pytest.skip("CUDA present")
    with pytest.raises(ConfigError, match="needs the model on a CUDA device"):
        build_model(weights, RuntimeOptions(decode="graphs"))


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_graphs_equal_the_static_step_bit_for_bit_on_the_gpu():
    w = V41Weights.random(CFG, seed=5, dtype=torch.bfloat16, device="cuda")
    reqs = mix()
    static, _ = generate(w, RuntimeOptions(decode="static", kernels="fused"), reqs, max_batch=4)
    graphs, model = generate(w, RuntimeOptions(decode="graphs", kernels="fused"), reqs, max_batch=4)
    for s, g in zip(static, graphs, strict=True):
        assert g.token_ids == s.token_ids and torch.equal(g.logits, s.logits)
    assert model.counters.graph_replays > 0
    # ...and with the compiled helpers on both sides
    opts = dict(kernels="fused", decode_compile=True)
    static, _ = generate(w, RuntimeOptions(decode="static", **opts), reqs, max_batch=4)
    graphs, _ = generate(w, RuntimeOptions(decode="graphs", **opts), reqs, max_batch=4)
    for s, g in zip(static, graphs, strict=True):
        assert g.token_ids == s.token_ids and torch.equal(g.logits, s.logits)


def test_kernels_used_says_where_the_fused_gemms_run(weights, monkeypatch):
    """The engagement ledger's ``kernels``: the fused experts op runs in static decode steps
    only (the engine's MoE loops over experts), and batch-invariant numerics run neither
    fused GEMM op (their own row tiles), whatever the registry chose."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    fused = ("none", "+linear", "+experts")
    engine = build_model(weights, RuntimeOptions(kernels=fused))
    assert engine.ops.describe()["experts"] == engine.kernels_used()["linear"] == "fused (interpret)"
    assert engine.kernels_used()["experts"].startswith("reference (the engine's MoE")
    static = build_model(weights, RuntimeOptions(kernels=fused, decode="static"), max_batch=2)
    assert isinstance(static, StaticDecodeModel)
    assert static.kernels_used()["experts"] == static.kernels_used()["linear"] == "fused (interpret)"
    invariant = build_model(weights, RuntimeOptions(kernels=fused, batch_invariant=True))
    assert {invariant.kernels_used()[op] for op in ("linear", "experts")} == {"reference (batch-invariant numerics)"}
    plain = build_model(weights, RuntimeOptions())
    assert plain.kernels_used() == plain.ops.describe()
