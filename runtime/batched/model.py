"""BatchedV41: the whole V4.1 forward on [B, T] tokens, batched and differentiable.

Each row of ``tokens`` is one sequence starting at position 0, causal, and the result
for every position is what the engine computes for a cold prefill in exact SWA mode
(``V41Model`` with ``RuntimeOptions(swa="exact")``, ``logits="all"``). Right-padding a
shorter row changes nothing in its real positions: every op is causal (window, visible
counts of compressed entries, Engram look-back) or per row.

Form (not math) differs from the engine so it runs fast on a GPU and under
``torch.compile``: no per-request loops, no host syncs, fixed shapes for a fixed [B, T]
(masks instead of slices), dense row-wise ops on all B*T rows at once, all experts
computed densely, the window attention in blocks of W. The runtime's math functions
(mHC, Sinkhorn, Engram, RMSNorm, RoPE, the fake-quants, pooling, routing, experts,
grouped output projection, index scores, top-k and candidate blocks) are called, not
copied.

Training: with ``straight_through=True`` the FP8/NVFP4/MXFP4 roundings keep their
forward value and pass the gradient unchanged (``rounding.py``). Hard choices (top-k
entries, candidate blocks, expert choice) pass no gradient; the selected values and the
routing weights do. The indexer learns from ``indexer_loss`` (``indexer.py``); the gate
bias from ``expert_load`` (``moe.py``), which is why ``ffn.gate.bias`` is the one
parameter with no gradient.

Precision: float32 weights give float32 everywhere. Under ``torch.autocast(dtype=bf16)``
the projections run in bf16 while the sites the spec keeps in float32 (mHC coefficients,
gate, ratio-2 compressor, indexer scores) stay float32; ``logits`` are always float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runtime.attention import output_projection
from runtime.batched.attention import engine_layout_attention, sparse_attention
from runtime.batched.common import RopeRows, float32_region
from runtime.batched.compressor import compress
from runtime.batched.engram import batch_hash_ids
from runtime.batched.indexer import index_queries, indexer_kl, select, selected_scores
from runtime.batched.moe import dense_moe
from runtime.batched.rounding import round_to
from runtime.engram import EngramHasher, engram
from runtime.mhc import HcMix, collapse, expand, first_pre, hc_mix
from runtime.numerics import ROW_TILE, Numerics, rms_norm
from runtime.rope import RopePair, apply_rope
from runtime.weights import V41Weights

ROPE_POSITIONS = 65536  # RoPE rows tabulated at construction (the longest T it accepts)


@dataclass
class BatchedOutput:
    logits: torch.Tensor  # float32 [B, T, vocab]
    indexer_loss: torch.Tensor  # 0-dim: mean over index-source layers of the DSA KL
    expert_load: torch.Tensor  # float32 [n_layers, n_routed_experts], detached, rows sum to 1


class BatchedV41:
    """``BatchedV41(weights)(tokens, straight_through=True) -> BatchedOutput``.

    Holds a reference to ``weights`` (never copies them); train ``weights.parameters()``.
    """

    def __init__(self, weights: V41Weights, *, row_invariant: bool = False):
        """``row_invariant`` (parity tests only): GEMMs in the engine's fixed row tiles and
        the attention in the engine's per-request layout (a loop over B, slow), so the
        result equals the engine's ``batch_invariant=True`` run bit for bit; the default
        is the fast batched form."""
        self.weights = weights
        self.config = c = weights.config
        self.row_invariant = row_invariant
        self.num = Numerics(ROW_TILE) if row_invariant else Numerics()
        device = weights.embed.weight.device
        rope = RopePair(c)
        n_pos = min(c.max_position_embeddings, ROPE_POSITIONS)
        self.rope_main = RopeRows(rope.main, n_pos, device)
        self.rope_compress = RopeRows(rope.compress, n_pos, device)
        self.hasher = EngramHasher(c).to(device) if c.engram_layer_ids else None

    def __call__(self, tokens: torch.Tensor, straight_through: bool = False) -> BatchedOutput:
        return self.forward(tokens, straight_through)

    def forward(self, tokens: torch.Tensor, straight_through: bool = False) -> BatchedOutput:
        c, w, num = self.config, self.weights, self.num
        b, t = tokens.shape
        rows = b * t
        eps = c.rms_norm_eps
        device = w.embed.weight.device
        hash_ids = None
        if self.hasher is not None:
            if self.hasher.primes.device != tokens.device:  # weights moved after construction
                self.hasher.to(tokens.device)
            hash_ids = batch_hash_ids(self.hasher, tokens)

        streams = w.embed.weight[tokens.reshape(-1)]  # [R, D]
        streams = streams.unsqueeze(1).expand(-1, c.hc_mult, -1)  # [R, hc, D]
        pre = first_pre(rows, c.hc_mult, device)
        pending = None  # (FFN output, its mix): expanded by the next site
        entries, keys = {}, {}  # KV source -> [B, N, hd] NVFP4, [B, N, dI] MXFP4
        topk, candidates = None, None  # the latest index source's choice
        losses, loads = [], []
        for layer in range(c.num_hidden_layers):
            lw = w.layers[layer]
            ratio = c.compress_ratios[layer]
            if pending is not None:
                streams, pending = expand(pending[0], streams, pending[1]), None
            if layer in c.engram_layer_ids:
                k = c.engram_layer_ids.index(layer)
                streams = engram(streams, hash_ids[:, k], lw.engram, c, num)
            mix_a = self._mix(streams, lw, "attn")
            x = rms_norm(collapse(streams, pre), lw.attn_norm.weight, eps)  # [R, D]
            rope = self.rope_compress if ratio > 0 else self.rope_main
            cos, sin = rope.rows(t, device)  # [T, rope/2]
            if layer in c.kv_source_layer_ids:
                entries[layer], keys[layer] = compress(x.reshape(b, t, -1), ratio, lw.attn, c,
                                                       self.rope_compress, num, straight_through)
            a = lw.attn
            q_r = rms_norm(num.linear(x, a.wq_a.weight), a.q_norm.weight, eps)  # [R, q_rank]
            q = num.linear(q_r, a.wq_b.weight).reshape(b, t, c.num_attention_heads, c.head_dim)
            q = apply_rope(q, cos[None], sin[None])
            kv = rms_norm(num.linear(x, a.wkv.weight), a.kv_norm.weight, eps).reshape(b, t, -1)
            kv = round_to(apply_rope(kv, cos[None], sin[None]), "fp8", straight_through)  # [B, T, hd]
            src = c.kv_source_of(layer)
            iq = None
            if layer in c.index_source_layer_ids:
                iq = index_queries(q_r.detach().reshape(b, t, -1), x.detach().reshape(b, t, -1),
                                   a.indexer, c, cos, sin, num, straight_through)
                topk, candidates = select(*iq, keys[src], ratio, layer, candidates, c, num)
            attend = self._engine_layout if self.row_invariant else sparse_attention
            out, p_comp = attend(q.float(), kv.float(), c.sliding_window,
                                 None if src is None else entries[src].float(),
                                 None if src is None else topk, a.attn_sink)
            if iq is not None and p_comp is not None:
                losses.append(indexer_kl(selected_scores(*iq, keys[src], topk), p_comp, topk))
            attn_out = output_projection(out.reshape(rows, c.num_attention_heads, c.head_dim),
                                         cos.expand(b, t, -1).reshape(rows, -1),
                                         sin.expand(b, t, -1).reshape(rows, -1), a, c.o_groups, num,
                                         x.dtype)
            streams = expand(attn_out, streams, mix_a)
            mix_f = self._mix(streams, lw, "ffn")
            f_in = rms_norm(collapse(streams, mix_a.pre), lw.ffn_norm.weight, eps)
            ffn_out, load = dense_moe(f_in, lw.ffn, c, num)
            loads.append(load)
            pending, pre = (ffn_out, mix_f), mix_f.pre
        streams = expand(pending[0], streams, pending[1])
        hidden = rms_norm(collapse(streams, pre), w.norm.weight, eps)
        logits = num.linear(hidden, w.head.weight).float().reshape(b, t, -1)
        loss = torch.stack(losses).mean() if losses else logits.new_zeros(())
        return BatchedOutput(logits, loss, torch.stack(loads))

    def _engine_layout(self, *args):
        return engine_layout_attention(*args, self.num)

    def _mix(self, streams: torch.Tensor, lw, site: str) -> HcMix:
        c = self.config
        with float32_region(streams):
            return hc_mix(streams, getattr(lw, f"hc_{site}_fn"), getattr(lw, f"hc_{site}_base"),
                          getattr(lw, f"hc_{site}_scale"), norm_eps=c.rms_norm_eps, hc_eps=c.hc_eps,
                          sinkhorn_iters=c.hc_sinkhorn_iters, num=self.num)
