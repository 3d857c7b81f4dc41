"""Fused Engram (runtime/kernels/engram.py) vs the reference ``runtime.engram.engram`` and
a float64 recompute, on random inputs drawn fresh every run (the seed is in every failure
message). Without CUDA the kernels run through the Triton interpreter on ``tiny`` shapes;
with CUDA the same checks run at ``mid``/``flash`` shapes in bf16 and fp32.

Tolerances (elementwise, ``v`` = the value row the element receives):
  gather     bit-equal to ``table[ids].reshape(T, -1).to(dtype)`` (a copy and one cast).
  full op    |fused - ref| <= base * max(1, |ref|) + |v| * spread, where ``spread`` is how
             far the gate moves when the dot moves by 2e-6 * sum_d |X * w * k| * rstd / sqrt(D)
             (the size of a float32 reordering of that sum). Why: the wkv GEMM is the same
             call on the same input, so keys and value are bit-equal, and only the three
             length-D sums are reduced in another order; the gate's signed sqrt then
             amplifies a last-bit difference of a near-zero dot by up to 1/(2 sqrt(1e-6))
             = 500 (seen: 3.6e-6 relative on one (token, stream) in 3840). Away from
             zero ``spread`` is ~1e-7 and the bound is the base.
             base: fp32 2e-6 (a few float32 ulps).
             bf16 2^-7 (one bf16 ulp of |ref|: the fp32 result before the final cast
             differs in its last bits, which can round to the neighbouring bf16 value;
             under the CPU interpreter, which casts fp32 -> bf16 by truncation instead of
             rounding, the same one-ulp bound holds).
  float64    fused fp32 vs a float64 recompute written with einsums: base 1e-5, dot
             slack 1e-5 * sum |X * w * k| * rstd / sqrt(D) (the fp32 GEMM of the reference
             path rounds the keys and the value too).
"""

from __future__ import annotations

import math
import os
from types import SimpleNamespace

import pytest
import torch

from runtime.config import V41Config
from runtime.engram import GATE_CLAMP, engram
from runtime.errors import CheckpointError, StateError
from runtime.numerics import Numerics
from runtime.quant import fake_quant_fp8_ue8m0

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
TINY = V41Config.preset("tiny")
MID = V41Config.preset("mid")
FLASH = V41Config.preset("flash")
NUM = Numerics()


@pytest.fixture
def fused(monkeypatch):
    """FusedEngram built after TRITON_INTERPRET=1 is set for this test only (CPU), so its
    kernels are wrapped for the interpreter (see runtime/kernels/backend.py)."""
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.kernels.engram import FusedEngram

    return FusedEngram()


@pytest.fixture
def seed():
    return int.from_bytes(os.urandom(4), "little")


def hash_cols(config: V41Config) -> int:
    return (config.engram_max_ngram_size - 1) * config.engram_n_heads


def make_case(seed, config, t, dtype, table_rows=None, quantise=True):
    """Random engram inputs for one layer: streams [T, hc, D], hash ids [T, cols] (a
    strided slice of a [T, 2, cols] tensor, as the layer passes them), the weights."""
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    hc, d, hd = config.hc_mult, config.hidden_size, config.engram_head_dim
    cols = hash_cols(config)
    rows = table_rows or config.engram_num_embeddings[0]

    def randn(*shape, scale=1.0):
        return torch.randn(*shape, generator=gen, device=DEVICE) * scale

    table = randn(rows, hd)
    if quantise:
        table = fake_quant_fp8_ue8m0(table)  # the release stores the tables in FP8
    weights = SimpleNamespace(
        embed=SimpleNamespace(weight=table.to(dtype)),
        wkv=SimpleNamespace(weight=randn((hc + 1) * d, cols * hd, scale=(cols * hd) ** -0.5).to(dtype)),
        q_weight=(1.0 + 0.5 * randn(hc, d)).to(dtype),
        k_weight=(1.0 + 0.5 * randn(hc, d)).to(dtype),
    )
    streams = randn(t, hc, d).to(dtype)
    ids = torch.randint(0, rows, (t, 2, cols), generator=gen, device=DEVICE)[:, 1]
    assert weights.wkv.weight.abs().max() > 0 and (t == 0 or streams.abs().max() > 0)  # never all zeros
    return streams, ids, weights


def float64_engram(streams, ids, w, config):
    """The op in float64, written with einsums: (out, value [T, D], dot [T, hc], dot_abs [T, hc])
    where dot_abs = sum_d |X * w * k| * rstd / sqrt(D) sizes a float32 reordering error."""
    t, hc, d = streams.shape
    rows = torch.index_select(w.embed.weight, 0, ids.reshape(-1)).double().reshape(t, -1)
    kv = torch.einsum("ti,oi->to", rows, w.wkv.weight.double())
    key, value = kv[:, : hc * d].reshape(t, hc, d), kv[:, hc * d :]
    h = streams.double()
    qk = w.q_weight.double() * w.k_weight.double()
    eps = config.rms_norm_eps
    norm = 1.0 / torch.sqrt((h * h).sum(-1) / d + eps) / torch.sqrt((key * key).sum(-1) / d + eps) / math.sqrt(d)
    dot = torch.einsum("tsd,sd,tsd->ts", h, qk, key) * norm
    dot_abs = torch.einsum("tsd,sd,tsd->ts", h.abs(), qk.abs(), key.abs()) * norm
    out = h + gate64(dot)[..., None] * value[:, None, :]
    return out, value, dot, dot_abs


def gate64(dot):
    return torch.sigmoid(torch.sign(dot) * torch.sqrt(dot.abs().clamp_min(GATE_CLAMP)))


def check_close(got, want, f64, base, dot_slack, what, seed):
    """Elementwise: |got - want| <= base * max(1, |want|) + |v| * (gate spread over dot +- slack)."""
    _, value, dot, dot_abs = f64
    slack = dot_slack * dot_abs
    spread = gate64(dot + slack) - gate64(dot - slack)  # the gate is monotonic in the dot
    got, want = got.double().cpu(), want.double().cpu()
    assert got.shape == want.shape, f"{what}: shapes {tuple(got.shape)} vs {tuple(want.shape)} (seed {seed})"
    bound = base * want.abs().clamp_min(1.0) + (value.abs()[:, None, :] * spread[..., None]).cpu()
    excess = (got - want).abs() - bound
    worst = int(excess.argmax()) if excess.numel() else 0
    assert excess.numel() == 0 or float(excess.max()) <= 0, (
        f"{what}: element {worst} differs by {float((got - want).abs().reshape(-1)[worst]):.3g} "
        f"> bound {float(bound.reshape(-1)[worst]):.3g} (seed {seed})"
    )


def check_engram(fused, seed, config, t, dtype, num=NUM, table_rows=None, edge_ids=False):
    streams, ids, w = make_case(seed, config, t, dtype, table_rows=table_rows, quantise=table_rows is None)
    rows = w.embed.weight.shape[0]
    if edge_ids:  # the first and the last row of the table, in every column position
        ids[0, 0::2], ids[-1, 1::2] = rows - 1, 0
        ids[t // 2, :] = rows - 1
    gathered = fused.gather(w.embed.weight, ids, w.wkv.weight.dtype)
    expected = w.embed.weight[ids].reshape(t, -1).to(w.wkv.weight.dtype)
    assert torch.equal(gathered, expected), f"gather differs at {(gathered != expected).nonzero()[:4].tolist()} (seed {seed})"
    got = fused(streams, ids, w, config, num)
    want = engram(streams, ids, w, config, num)
    assert got.dtype == streams.dtype and got.shape == streams.shape
    f64 = float64_engram(streams, ids, w, config)
    base = 2e-6 if dtype == torch.float32 else 2.0**-7
    check_close(got, want, f64, base, 2e-6, f"engram {dtype} T={t} vs reference", seed)
    if dtype == torch.float32:
        check_close(got, f64[0], f64, 1e-5, 1e-5, f"engram T={t} vs float64", seed)


# ---------------------------------------------------------------------------- CPU (interpreter)
@pytest.mark.parametrize("t", [1, 2, 7, 13])
def test_engram_parity_tiny(fused, seed, t):
    check_engram(fused, seed, TINY, t, torch.float32)


def test_engram_parity_row_invariant_numerics(fused, seed):
    """The batch-invariant GEMM path (row tiles of 64, padding) goes through num.linear too."""
    check_engram(fused, seed, TINY, 5, torch.float32, num=Numerics.for_options(batch_invariant=True))


def test_engram_table_edges(fused, seed):
    """Row ids 0 and rows-1 (the last row of the table) gather exactly."""
    check_engram(fused, seed, TINY, 3, torch.float32, edge_ids=True)


def test_engram_odd_shapes_masked(fused, seed):
    """Non-power-of-two hidden size, head_dim and column count exercise every mask."""
    config = TINY.replace(hidden_size=160, engram_n_heads=3, engram_head_dim=96)
    check_engram(fused, seed, config, 3, torch.float32)


def test_engram_bf16_interpreted(fused, seed):
    check_engram(fused, seed, TINY, 3, torch.bfloat16)


def test_engram_on_the_models_own_weights(fused, seed):
    """The weight module the layer passes (lw.engram of V41Weights), with hasher ids."""
    from runtime.engram import EngramHasher
    from runtime.weights import V41Weights

    weights = V41Weights.random(TINY, seed=seed % 10_000, device=DEVICE)
    gen = torch.Generator().manual_seed(seed)
    history = torch.randint(0, TINY.vocab_size, (12,), generator=gen).to(DEVICE)
    hash_ids = EngramHasher(TINY)(history, torch.arange(4, 12, device=DEVICE))  # [T, L, cols]
    streams = torch.randn(8, TINY.hc_mult, TINY.hidden_size, generator=gen).to(DEVICE)
    for k, layer in enumerate(TINY.engram_layer_ids):
        lw = weights.layer(layer).engram
        got = fused(streams, hash_ids[:, k], lw, TINY, NUM)
        want = engram(streams, hash_ids[:, k], lw, TINY, NUM)
        check_close(got, want, float64_engram(streams, hash_ids[:, k], lw, TINY), 2e-6, 2e-6,
                    f"engram layer {layer}", seed)


def test_engram_empty_batch(fused, seed):
    streams, ids, w = make_case(seed, TINY, 0, torch.float32)
    # (the reference's reshape(0, -1) raises on T = 0; the fused op returns the empty streams)
    assert fused(streams, ids, w, TINY, NUM).shape == (0, TINY.hc_mult, TINY.hidden_size)


def test_engram_gate_clamp_region(fused, seed):
    """q*k weights of 1e-8 put every |dot| below the 1e-6 clamp: gate = sigmoid(+-1e-3)
    by the sign of the dot (the sign is the only thing left to get right)."""
    streams, ids, w = make_case(seed, TINY, 4, torch.float32)
    w.q_weight = w.q_weight * 1e-8
    f64 = float64_engram(streams, ids, w, TINY)
    assert float(f64[2].abs().max()) < GATE_CLAMP, f"seed {seed}"
    check_close(fused(streams, ids, w, TINY, NUM), engram(streams, ids, w, TINY, NUM), f64, 2e-6, 2e-6,
                "engram, clamped dots", seed)
    check_close(fused(streams, ids, w, TINY, NUM), f64[0], f64, 1e-5, 1e-5, "engram, clamped dots vs float64", seed)


def test_engram_rejects_bad_inputs(monkeypatch, seed):
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.kernels.engram import FusedEngram

    fused = FusedEngram(check_ids=True)  # the default checks ids on CPU only (no device sync)
    streams, ids, w = make_case(seed, TINY, 3, torch.float32)
    rows = w.embed.weight.shape[0]
    for bad in (rows, -1):
        wrong = ids.clone()
        wrong[1, 2] = bad
        with pytest.raises(StateError, match=rf"hash_ids: row ids must lie in \[0, {rows}\).*{bad}"):
            fused(streams, wrong, w, TINY, NUM)
    with pytest.raises(StateError, match=r"hash_ids: expected \[3, cols\]"):
        fused(streams, ids[:2], w, TINY, NUM)
    with pytest.raises(StateError, match="int64/int32"):
        fused(streams, ids.float(), w, TINY, NUM)
    with pytest.raises(CheckpointError, match=r"engram.wkv.weight: expected"):
        fused(streams, ids[:, :-1], w, TINY, NUM)
    short = SimpleNamespace(**{**vars(w), "q_weight": w.q_weight[:, :-1]})
    with pytest.raises(CheckpointError, match=r"engram.q_weight: expected \(4, 256\)"):
        fused(streams, ids, short, TINY, NUM)


def test_engram_unchecked_ids_never_read_outside_the_table(monkeypatch, seed):
    """Unchecked (check_ids=False; the default on CUDA), an out-of-range id gathers a zero row."""
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.kernels.engram import FusedEngram

    _, ids, w = make_case(seed, TINY, 2, torch.float32)
    rows, hd = w.embed.weight.shape
    ids[1, 3] = rows + 5
    got = FusedEngram(check_ids=False).gather(w.embed.weight, ids, torch.float32).reshape(2, -1, hd)
    assert torch.equal(got[1, 3], torch.zeros(hd, device=DEVICE)), f"seed {seed}"
    keep = torch.ones_like(ids, dtype=torch.bool)
    keep[1, 3] = False
    assert torch.equal(got[keep], w.embed.weight[ids[keep]]), f"seed {seed}"


def test_registry_builds_the_fused_engram(monkeypatch):
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.kernels import KernelRegistry
    from runtime.kernels.engram import FusedEngram

    ops = KernelRegistry(["+engram"], device=DEVICE, on_unavailable="error")
    assert ops.selected["engram"] == "fused" and isinstance(ops.engram, FusedEngram)


# ---------------------------------------------------------------------------- GPU
# flash: the real per-token shapes (D = 5120, 24 columns x 256) with a table of 9M rows
# (> 2^31 values, so row offsets need int64) instead of the release's 3.8e8 rows.
FLASH_ROWS = 9_000_000


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("config,t", [(MID, 1), (MID, 8), (MID, 300), (FLASH, 1), (FLASH, 64), (FLASH, 517)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_engram_parity_gpu(fused, seed, config, t, dtype):
    rows = FLASH_ROWS if config is FLASH else None
    check_engram(fused, seed, config, t, dtype, table_rows=rows, edge_ids=True)
