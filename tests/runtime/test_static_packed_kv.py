"""Packed KV storage in the static decode step (``RuntimeOptions.kv_storage``): the slab
holds the window and global KV as bytes (runtime/kv_packing.py), the rope_quant writes
pack them and the fused ring attention decodes them in-kernel. The decoded values are
the dequantized slab's values exactly, so every step's logits, and the exported state,
must be bit for bit those of the same step over a dequantized slab.

``tiny`` with a test-only window of 8 (the ring wraps inside the steps, ratio-2 groups
complete, a bounded-replay state has its window floor inside the window), float32 on
CPU through the Triton interpreter (it cannot compute bf16).
"""

from __future__ import annotations

import functools

import pytest
import torch

from runtime.config import V41Config
from runtime.errors import ConfigError, StateError
from runtime.kv_packing import PackedKV
from runtime.model import SeqChunk, V41Model
from runtime.options import RuntimeOptions
from runtime.static import DecodeSlab, StaticDecodeStep
from runtime.static.model import StaticDecodeModel
from runtime.weights import V41Weights

W = 8
MAX_LEN = 48

pytestmark = pytest.mark.usefixtures("one_thread")


@functools.lru_cache(maxsize=1)
def weights() -> V41Weights:
    cfg = V41Config.preset("tiny").replace(sliding_window=W, index_topk=8, candidate_topk_blocks=3,
                                           candidate_block_size=4)
    return V41Weights.random(cfg, seed=5)


def prompt(n: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 512, (n,), generator=torch.Generator().manual_seed(seed))


def states(options: RuntimeOptions):
    """Cold prompts below and past the window, and a bounded-replay hit with a window
    floor inside the decode window."""
    w = weights()
    exact = V41Model(w, options.with_(kernels="reference", decode="engine", kv_storage="dequantized"))
    out = []
    for i, n in enumerate((5, W + 3)):
        st = exact.new_state()
        exact.forward([SeqChunk(st, prompt(n, i))])
        out.append(st)
    full = prompt(15, 50)
    donor = exact.new_state()
    exact.forward([SeqChunk(donor, full[:12])])
    bounded = V41Model(w, RuntimeOptions(swa="bounded", encoder_replay=True, replay_tokens=3, decoder_trim=False))
    st = bounded.new_state(donor.export_prefix(12))
    bounded.forward([SeqChunk(st, st.tokens_to_feed_after_hit(full))])
    out.append(st)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("kernels", ["+attention", "+attention,+rope_quant"])
def test_packed_step_is_bitwise_the_dequantized_step(monkeypatch, kernels):
    """~20 s each (the interpreter). Reference rope_quant (torch pack on write) and fused
    (the kernel packs): W + 3 teacher-forced steps, logits and exported states bit for bit."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    options = RuntimeOptions(kernels=kernels, decode="static")
    loaded = states(options)
    steps = {}
    for storage in ("dequantized", "packed"):
        slab = DecodeSlab(weights().config, len(loaded) + 1, MAX_LEN, torch.float32, "cpu", kv_storage=storage)
        for slot, st in enumerate(loaded):
            slab.load(slot, st)
        slab.reset(len(loaded))
        steps[storage] = StaticDecodeStep(weights(), options.with_(kv_storage=storage), slab)
    packed = steps["packed"]
    assert isinstance(packed.slab.swa[0], PackedKV) and packed.slab.swa[0].codes.dtype == torch.uint8
    assert packed.kernels_used["kv_storage"].startswith("packed")
    assert ("kernel packs" in packed.kernels_used["kv_storage"]) == ("rope_quant" in kernels)
    assert steps["dequantized"].kernels_used["kv_storage"] == "dequantized"
    feed = torch.randint(0, 512, (W + 3, len(loaded) + 1), generator=torch.Generator().manual_seed(7))
    for s in range(feed.shape[0]):
        want = steps["dequantized"].step(feed[s])
        got = packed.step(feed[s])
        assert torch.equal(got.view(torch.int32), want.view(torch.int32)), \
            f"step {s}: max |diff| {(got - want).abs().max():.3g}"
    for slot in range(len(loaded) + 1):
        a, b = packed.slab.export(slot), steps["dequantized"].slab.export(slot)
        for src in b.global_kv:
            assert torch.equal(a.global_kv[src], b.global_kv[src]), f"slot {slot} global_kv[{src}]"
        for layer in range(len(b.swa)):
            assert torch.equal(a.swa[layer].nan_to_num(7.0), b.swa[layer].nan_to_num(7.0)), f"slot {slot} swa"


def test_packed_slab_reads_a_quarter_to_a_half_of_the_bytes():
    """The slab's own tensors: FP8 ring 1 + 1/32 bytes per value, NVFP4 1/2 + 1/16 (float32: 4)."""
    cfg = weights().config
    slab = DecodeSlab(cfg, 2, MAX_LEN, torch.float32, "cpu", kv_storage="packed")
    hd = cfg.head_dim
    assert slab.swa[0].nbytes() == 2 * W * (hd + hd // 32)
    src = cfg.kv_source_layer_ids[0]
    n = MAX_LEN // cfg.compress_ratios[src]
    assert slab.global_kv[src].nbytes() == 2 * n * (hd // 2 + hd // 16)


def test_packed_needs_the_fused_ring_attention():
    """One line naming the switch; a packed slab under a step that would not read it."""
    for bad in (dict(decode="engine", kernels="all"), dict(decode="static", kernels="-attention"),
                dict(decode="static", kernels="all", batch_invariant=True)):
        with pytest.raises(ConfigError, match=r"^RuntimeOptions.kv_storage: 'packed' needs decode") as err:
            RuntimeOptions(kv_storage="packed", **bad)
        assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="DecodeSlab.kv_storage"):
        DecodeSlab(weights().config, 1, MAX_LEN, torch.float32, "cpu", kv_storage="fp8")
    slab = DecodeSlab(weights().config, 1, MAX_LEN, torch.float32, "cpu", kv_storage="packed")
    with pytest.raises(StateError, match="only the fused ring attention"):
        StaticDecodeStep(weights(), RuntimeOptions(), slab)


def test_static_model_packs_only_where_the_fused_attention_runs(monkeypatch):
    """Without a Triton backend (no CUDA, no interpreter) fused attention falls back to the
    reference; the wrapper then keeps a dequantized slab, and the step's record says that
    packed was asked and did not run."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    options = RuntimeOptions(kernels="+attention", decode="static", kv_storage="packed")
    with pytest.warns(RuntimeWarning, match="fused attention cannot run here"):
        model = StaticDecodeModel(V41Model(weights(), options), max_batch=2)
    assert model.slab.kv_storage == "dequantized"
    assert model.decoder.kernels_used["kv_storage"].startswith("dequantized (kv_storage = packed asked")


def test_load_refuses_values_off_the_format_grid():
    """A state whose window KV is not FP8-quantised (not this model's cache) cannot be
    packed exactly: one-line StateError naming the cache."""
    options = RuntimeOptions()
    st = states(options)[1]
    st.swa[3][: st.num_computed] += 1e-3 * torch.rand(st.num_computed, st.swa[3].shape[1],
                                                      generator=torch.Generator().manual_seed(1))
    slab = DecodeSlab(weights().config, 1, MAX_LEN, torch.float32, "cpu", kv_storage="packed")
    with pytest.raises(StateError, match=r"DecodeSlab.load: swa\[3\]: packed KV: \d+ values are not on the fp8 grid"):
        slab.load(0, st)
