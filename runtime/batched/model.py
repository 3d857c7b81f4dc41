"""BatchedV41: the whole V4.1 forward on [B, T] tokens, batched and differentiable.

Each row of ``tokens`` is one sequence starting at position 0, causal, and the result
for every position is what the engine computes for a cold prefill in exact SWA mode
(``V41Model`` with ``RuntimeOptions(swa="exact")``, ``logits="all"``). Right-padding a
shorter row changes nothing in its real positions: every op is causal (window, visible
counts of compressed entries, Engram look-back) or per row. (Padding positions do count
in ``expert_load`` and ``indexer_loss``, which see every position of the batch.)

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

from collections.abc import Callable
from dataclasses import dataclass

import torch

from runtime.batched.common import RopeRows, float32_region
from runtime.batched.engram import batch_hash_ids
from runtime.batched.layer import CsaState, attention_sublayer
from runtime.batched.moe import dense_moe
from runtime.engram import EngramHasher, engram
from runtime.mhc import HcMix, collapse, expand, first_pre, hc_mix
from runtime.numerics import ROW_TILE, Numerics, rms_norm
from runtime.rope import RopePair
from runtime.weights import V41Weights

ROPE_POSITIONS = 65536  # RoPE rows tabulated at construction (the longest T it accepts)


@dataclass
class BatchedOutput:
    logits: torch.Tensor  # float32 [B, T, vocab]
    indexer_loss: torch.Tensor  # 0-dim: mean over index-source layers of the DSA KL (0 if row_invariant)
    expert_load: torch.Tensor  # float32 [n_layers, n_routed_experts], detached, rows sum to 1


class BatchedV41:
    """``BatchedV41(weights)(tokens, straight_through=True) -> BatchedOutput``.

    Holds a reference to ``weights`` (never copies them); train ``weights.parameters()``.
    """

    def __init__(self, weights: V41Weights, *, row_invariant: bool = False,
                 index_topk: int | None = None):
        """``row_invariant`` (parity tests only): GEMMs in the engine's fixed row tiles and
        the attention in the engine's per-request layout (a loop over B, slow), so the
        result equals the engine's ``batch_invariant=True`` run bit for bit; the default
        is the fast batched form.

        ``index_topk`` (training only): select this many compressed entries instead of the
        config's ``index_topk`` (candidate blocks widened to match), e.g. for a dense
        warm-up of the attention and the indexer (DeepSeek-V3.2's DSA recipe) before the
        sparse top-k the model is served with."""
        self.weights = weights
        c = weights.config
        if index_topk is not None:
            blocks = -(-index_topk // c.candidate_block_size)
            c = c.replace(index_topk=index_topk,
                          candidate_topk_blocks=max(blocks, c.candidate_topk_blocks))
        self.config = c
        self.row_invariant = row_invariant
        self.num = Numerics(ROW_TILE) if row_invariant else Numerics()
        device = weights.embed.weight.device
        rope = RopePair(c)
        n_pos = min(c.max_position_embeddings, ROPE_POSITIONS)
        self.rope_main = RopeRows(rope.main, n_pos, device)
        self.rope_compress = RopeRows(rope.compress, n_pos, device)
        self.hasher = (EngramHasher(c, weights.engram_token_map).to(device)
                       if c.engram_layer_ids else None)

    def __call__(self, tokens: torch.Tensor, straight_through: bool = False) -> BatchedOutput:
        return self.forward(tokens, straight_through)

    def forward(self, tokens: torch.Tensor, straight_through: bool = False) -> BatchedOutput:
        c, w, num = self.config, self.weights, self.num
        b, t = tokens.shape
        streams, pre, hash_ids = self.embed(tokens)
        csa = CsaState()
        streams, pending, pre, loads = self.run_layers(range(c.num_hidden_layers), streams, None, pre, (b, t),
                                                       csa, hash_ids, straight_through)
        streams = expand(pending[0], streams, pending[1])
        hidden = rms_norm(collapse(streams, pre), w.norm.weight, c.rms_norm_eps)
        logits = num.linear(hidden, w.head.weight).float().reshape(b, t, -1)
        loss = torch.stack(csa.losses).mean() if csa.losses else logits.new_zeros(())
        return BatchedOutput(logits, loss, torch.stack(loads))

    def embed(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """tokens [B, T] -> (streams [B*T, hc, D], layer 0's delayed pre [B*T, hc], Engram
        hash ids [B*T, n_engram_layers, cols] or None)."""
        c, w = self.config, self.weights
        rows = tokens.numel()
        hash_ids = None
        if self.hasher is not None:
            if self.hasher.primes.device != tokens.device:  # weights moved after construction
                self.hasher.to(tokens.device)
            hash_ids = batch_hash_ids(self.hasher, tokens)
        streams = w.embed.weight[tokens.reshape(-1)]  # [R, D]
        streams = streams.unsqueeze(1).expand(-1, c.hc_mult, -1)  # [R, hc, D]
        return streams, first_pre(rows, c.hc_mult, w.embed.weight.device), hash_ids

    def run_layers(self, layers: range, streams: torch.Tensor, pending: tuple | None, pre: torch.Tensor,
                   shape: tuple[int, int], csa: CsaState, hash_ids: torch.Tensor | None,
                   straight_through: bool = False, start: int = 0, indexer_loss: bool = True,
                   moe: Callable | None = None) -> tuple[torch.Tensor, tuple, torch.Tensor, list[torch.Tensor]]:
        """Run ``layers`` on rows [B*T] (``shape`` = (B, T), positions start .. start+T-1
        of each sequence, see ``attention_sublayer``) -> (streams, pending = (the last FFN's
        output, its mix) for the next site to expand, that site's pre, expert loads).
        One loop for training (all layers) and for the prefill's two segments
        (``runtime.batched.prefill``), so the two cannot drift apart.

        ``moe(layer, x, ffn) -> output`` replaces the dense experts (the prefill's grouped
        MoE); then no loads are returned (they only train the gate bias)."""
        c, w, num = self.config, self.weights, self.num
        eps = c.rms_norm_eps
        ropes = (self.rope_main, self.rope_compress)
        loads = []
        for layer in layers:
            lw = w.layers[layer]
            if pending is not None:
                streams, pending = expand(pending[0], streams, pending[1]), None
            if layer in c.engram_layer_ids:
                k = c.engram_layer_ids.index(layer)
                streams = engram(streams, hash_ids[:, k], lw.engram, c, num)
            mix_a = self._mix(streams, lw, "attn")
            x = rms_norm(collapse(streams, pre), lw.attn_norm.weight, eps)  # [R, D]
            attn_out = attention_sublayer(layer, x, shape, lw, c, ropes, num, csa, straight_through,
                                          engine_layout=self.row_invariant, start=start,
                                          indexer_loss=indexer_loss)
            streams = expand(attn_out, streams, mix_a)
            mix_f = self._mix(streams, lw, "ffn")
            f_in = rms_norm(collapse(streams, mix_a.pre), lw.ffn_norm.weight, eps)
            if moe is None:
                ffn_out, load = dense_moe(f_in, lw.ffn, c, num)
                loads.append(load)
            else:
                ffn_out = moe(layer, f_in, lw.ffn)
            pending, pre = (ffn_out, mix_f), mix_f.pre
        return streams, pending, pre, loads

    def _mix(self, streams: torch.Tensor, lw, site: str) -> HcMix:
        c = self.config
        with float32_region(streams):
            return hc_mix(streams, getattr(lw, f"hc_{site}_fn"), getattr(lw, f"hc_{site}_base"),
                          getattr(lw, f"hc_{site}_scale"), norm_eps=c.rms_norm_eps, hc_eps=c.hc_eps,
                          sinkhorn_iters=c.hc_sinkhorn_iters, num=self.num)
