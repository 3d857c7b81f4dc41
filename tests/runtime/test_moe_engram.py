"""MoE gate and experts, Engram hashing and gating, against float64 / pure-Python
recomputes."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import torch

from runtime.config import V41Config, engram_primes
from runtime.engram import EngramHasher, engram
from runtime.moe import expert, moe, route
from runtime.numerics import Numerics

CFG = V41Config.preset("tiny")


def gate_ref(x, w, bias, cfg):
    """Float64 loops: sqrtsoftplus scores, bias-only selection (ties: lower id), renorm."""
    out = []
    for row in x.double().tolist():
        scores = []
        for e in range(w.shape[0]):
            z = sum(a * b for a, b in zip(row, w[e].double().tolist(), strict=True)) / cfg.gate_temp
            scores.append(math.sqrt(math.log1p(math.exp(z))))
        ranked = sorted(range(len(scores)), key=lambda e: (-(scores[e] + float(bias[e])), e))
        chosen = ranked[: cfg.num_experts_per_tok]
        total = sum(scores[e] for e in chosen) + 1e-20
        out.append({e: scores[e] / total * cfg.routed_scaling_factor for e in chosen})
    return out


def test_gate_selects_with_bias_and_weights_without_it():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(6, 256, generator=gen)
    w = torch.randn(8, 256, generator=gen) / 16
    bias = torch.randn(8, generator=gen)
    weights, idx = route(x, w, bias, CFG, Numerics())
    ref = gate_ref(x, w, bias, CFG)
    for r in range(6):
        assert set(idx[r].tolist()) == set(ref[r])
        for slot, e in enumerate(idx[r].tolist()):
            assert abs(float(weights[r, slot]) - ref[r][e]) < 1e-5
    # The bias steers selection: a huge bias on expert 3 picks it everywhere, but its
    # routing weight still comes from the unbiased score.
    big = torch.zeros(8)
    big[3] = 1e3
    w2, idx2 = route(x, w, big, CFG, Numerics())
    assert (idx2 == 3).any(-1).all()
    slot = (idx2 == 3).int().argmax(-1)
    for r in range(6):
        raw = math.sqrt(math.log1p(math.exp(float(x[r].double() @ w[3].double()))))
        others = [e for e in idx2[r].tolist() if e != 3]
        raw_other = math.sqrt(math.log1p(math.exp(float(x[r].double() @ w[others[0]].double()))))
        expect = raw / (raw + raw_other) * CFG.routed_scaling_factor
        assert abs(float(w2[r, slot[r]]) - expect) < 1e-5


def test_gate_ties_go_to_the_lowest_expert_id():
    x = torch.zeros(2, 256)
    w = torch.zeros(8, 256)  # every score equal
    _, idx = route(x, w, torch.zeros(8), CFG, Numerics())
    assert sorted(idx[0].tolist()) == [0, 1]


def test_expert_clamps_and_moe_sum():
    gen = torch.Generator().manual_seed(1)
    d, inter = 32, 32
    x = torch.randn(5, d, generator=gen) * 4
    w1, w3 = torch.randn(inter, d, generator=gen), torch.randn(inter, d, generator=gen)
    w2 = torch.randn(d, inter, generator=gen) / 8
    got = expert(x, w1, w2, w3, 10.0, Numerics(), torch.full((5, 1), 0.5))
    xd = x.double()
    gate = (xd @ w1.double().t()).clamp(max=10.0)
    up = (xd @ w3.double().t()).clamp(-10.0, 10.0)
    ref = (0.5 * gate / (1 + torch.exp(-gate)) * up) @ w2.double().t()
    assert torch.allclose(got.double(), ref, rtol=1e-4, atol=1e-3)
    assert (xd @ w1.double().t()).max() > 10 and (xd @ w3.double().t()).abs().max() > 10  # clamps bite

    # moe = sum over chosen experts of weight * expert + shared expert.
    cfg = CFG.replace(hidden_size=32, moe_intermediate_size=32, n_routed_experts=4, num_experts_per_tok=2)
    mk = lambda: SimpleNamespace(w1=SimpleNamespace(weight=torch.randn(32, 32, generator=gen) / 6),  # noqa: E731
                                 w2=SimpleNamespace(weight=torch.randn(32, 32, generator=gen) / 6),
                                 w3=SimpleNamespace(weight=torch.randn(32, 32, generator=gen) / 6))
    ffn = SimpleNamespace(gate=SimpleNamespace(weight=torch.randn(4, 32, generator=gen), bias=torch.zeros(4)),
                          experts=[mk() for _ in range(4)], shared_experts=mk())
    y = moe(x, ffn, cfg, Numerics())
    weights, idx = route(x, ffn.gate.weight, ffn.gate.bias, cfg, Numerics())
    for r in range(5):
        ref = torch.zeros(32, dtype=torch.float64)
        for slot in range(2):
            ex = ffn.experts[int(idx[r, slot])]
            ref += expert(x[r : r + 1].double(), ex.w1.weight.double(), ex.w2.weight.double(),
                          ex.w3.weight.double(), 10.0, Numerics(), weights[r, slot].double().view(1, 1))[0]
        sh = ffn.shared_experts
        ref += expert(x[r : r + 1].double(), sh.w1.weight.double(), sh.w2.weight.double(),
                      sh.w3.weight.double(), 10.0, Numerics())[0]
        assert torch.allclose(y[r].double(), ref, rtol=1e-4, atol=1e-4)


def hash_ref(tokens: list[int], pos: int, layer_id: int, k: int, cfg: V41Config) -> list[int]:
    """Pure-Python ints: rolling XOR of token * odd multiplier, mod per-head primes."""
    bound = max(1, (2**63 - 1) // cfg.engram_compressed_vocab_size // 2)
    rng = np.random.default_rng(10007 * layer_id)
    mults = [int(v) * 2 + 1 for v in rng.integers(0, bound, size=cfg.engram_max_ngram_size, dtype=np.int64)]
    primes = engram_primes(cfg)[k]
    offsets, total = [], 0
    for sizes in primes:
        for p in sizes:
            offsets.append(total)
            total += p
    ids, blocked = [], False
    for shift in range(cfg.engram_max_ngram_size):
        blocked = blocked or pos - shift < 0
        ids.append(cfg.engram_pad_id if blocked else tokens[pos - shift])
    rolling, out = ids[0] * mults[0], []
    for n in range(1, cfg.engram_max_ngram_size):
        rolling ^= ids[n] * mults[n]
        for h, p in enumerate(primes[n - 1]):
            out.append(rolling % p + offsets[(n - 1) * cfg.engram_n_heads + h])
    return out


def test_engram_hash_matches_pure_python_and_crosses_chunks():
    hasher = EngramHasher(CFG)
    gen = torch.Generator().manual_seed(2)
    history = torch.randint(0, 512, (40,), generator=gen)
    # Positions of a "chunk" starting at 17: look-back reads positions 14..16 from history.
    positions = torch.arange(17, 23)
    got = hasher(history, positions)
    full = hasher(history, torch.arange(0, 40))
    assert torch.equal(got, full[17:23])
    for k, layer_id in enumerate(CFG.engram_layer_ids):
        for pos in [0, 1, 2, 3, 17, 39]:
            assert full[pos, k].tolist() == hash_ref(history.tolist(), pos, layer_id, k, CFG)
        assert int(full[:, k].max()) < CFG.engram_num_embeddings[k]


def test_engram_gate_against_float64():
    gen = torch.Generator().manual_seed(3)
    t, hc, d, cols, hdim = 3, 4, 64, 6, 32
    cfg = CFG.replace(hidden_size=d)
    w = SimpleNamespace(
        embed=SimpleNamespace(weight=torch.randn(50, hdim, generator=gen)),
        wkv=SimpleNamespace(weight=torch.randn((hc + 1) * d, cols * hdim, generator=gen) / 14),
        q_weight=torch.randn(hc, d, generator=gen), k_weight=torch.randn(hc, d, generator=gen),
    )
    streams = torch.randn(t, hc, d, generator=gen)
    ids = torch.randint(0, 50, (t, cols), generator=gen)
    got = engram(streams, ids, w, cfg, Numerics())
    for r in range(t):
        e = w.embed.weight[ids[r]].double().reshape(-1)
        kv = w.wkv.weight.double() @ e
        value = kv[hc * d :]
        for s in range(hc):
            key = kv[s * d : (s + 1) * d]
            h = streams[r, s].double()
            dot = float((h * w.q_weight[s].double() * w.k_weight[s].double() * key).sum())
            dot /= math.sqrt(float(h.pow(2).mean()) + 1e-6) * math.sqrt(float(key.pow(2).mean()) + 1e-6)
            dot /= math.sqrt(d)
            gate = 1 / (1 + math.exp(-math.copysign(math.sqrt(max(abs(dot), 1e-6)), dot)))
            assert torch.allclose(got[r, s].double(), h + gate * value, atol=1e-4)
