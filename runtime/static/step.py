"""StaticDecodeStep: one decode token for each of slots 0..B-1 of a DecodeSlab, on fixed
shapes, writing the slab in place, with no host sync (so it can be captured in a CUDA
graph per batch-size bucket).

It is the engine's decode math (runtime/model.py, runtime/layer.py) in another form:
the same runtime functions (mHC sites, RMSNorm, RoPE tables, the fake-quants, the
compressor pooling, the router, the output projection, the registry's kernels), but
- every slot is one row of every op: no loop over requests or segments;
- caches are the slab's preallocated tensors, written with scatter/where, never grown;
- positions, floors and visible counts are device tensors, never read on the host;
- the ratio-2 compressor pools every step and writes where a group completes (a mask);
- the indexer scores all of a slot's key rows, masked to the visible ones;
- the MoE is grouped_moe (fast numerics) or every_expert_moe (batch-invariant numerics);
- what the layers read that depends only on the step (key layouts, write indices, RoPE
  rows, visibility masks) is built once per step and ratio (``_StepShared``), since at
  batch 1 a replayed step is bound by its kernel count (benchmarks/step_ops.py counts them).

Rows: as in the engine, batch-invariant numerics pad the row set to the GEMM row tile
(dummy rows of token 0 at position 0 run the dense ops only), so each slot's numbers
equal the engine's for that request; the fast path runs exactly B rows.

The caller keeps every slot in 0..B-1 active (padding with dummy slots, e.g. a
``DecodeSlab.reset`` one) and checks room on the host: ``step`` calls
``DecodeSlab.reserve`` (host-side counters only) before it writes anything; a replayed
CUDA graph of ``step`` runs none of its Python, so call ``slab.reserve(B)`` before each
replay. ``tokens`` should already be on the slab's device (a host tensor costs a
synchronous copy) and hold ids in [0, vocab): nothing checks them on the host.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runtime.attention import output_projection
from runtime.batched.common import RopeRows
from runtime.engram import EngramHasher
from runtime.errors import StateError
from runtime.grouped_moe import stack_all_layers
from runtime.layer import StepContext, mhc_site
from runtime.mhc import collapse, expand, first_pre
from runtime.numerics import Numerics
from runtime.options import RuntimeOptions
from runtime.rope import RopePair
from runtime.static.compressor import GroupIndex, slot_rows, update_kv_source, write_rows
from runtime.static.helpers import StepHelpers
from runtime.static.indexer import Visibility, select
from runtime.static.moe import every_expert_moe
from runtime.static.packing import PackingQuant
from runtime.static.slab import DecodeSlab
from runtime.weights import V41Weights

# Registry ops this step calls through runtime.kernels (the rest have per-request
# wrappers and run as batched torch here).
REGISTRY_OPS = ("mhc", "gate", "topk", "inv_rope", "compress", "rope_quant", "engram", "linear", "experts")
BATCHED_REFERENCE = "batched reference (runtime.static)"
FUSED_RING = "fused (slab ring, runtime/static/ring_attention.py)"


@dataclass(frozen=True)
class _StepShared:
    """What every layer of one step reads: built once per step, not per layer.
    ``groups`` (write indices, compressed RoPE rows) is per KV-source ratio,
    ``visible`` (visible counts and hidden key rows) per index-source ratio.
    ``selection`` is mutable on purpose: each index source replaces its key layout and
    candidate blocks for the layers that follow."""

    b: int
    hash_ids: torch.Tensor | None
    tables: dict
    window: object
    ring_at: torch.Tensor
    groups: dict
    visible: dict
    selection: dict


class StaticDecodeStep:
    """``step(tokens [B]) -> float32 logits [B, vocab]`` for slots 0..B-1 of ``slab``.

    Of ``options`` the decode step reads ``kernels`` and ``batch_invariant``; the SWA
    switches act at prefill and prefix restore, which the loaded states carry already
    (their window floors). ``kernels_used``: op -> "fused" / "reference" for the
    registry ops the step calls, and a note for the two it runs in its own form: the
    indexer as batched torch; attention as batched torch, or, when the registry's
    attention is fused and the numerics are fast, as the fused kernel over the slab's
    ring (batch-invariant numerics keep the batched torch core, bitwise the engine's);
    ``"kv_storage"``: whether the slab's window / global KV is packed (runtime/static/packing.py)."""

    def __init__(self, weights: V41Weights, options: RuntimeOptions | None, slab: DecodeSlab,
                 reuse: StaticDecodeStep | None = None):
        """``reuse``: a step of the same weights and options (on a smaller slab) whose
        stacked experts, float32 compressor weights and compiled helpers this one takes
        instead of copying and compiling them again."""
        if reuse is not None and (reuse.weights is not weights or reuse.options != (options or RuntimeOptions())):
            raise StateError("StaticDecodeStep: reuse needs a step of the same weights and options")
        self.weights = weights
        self.options = options or RuntimeOptions()
        c = self.config = weights.config
        self.slab = slab
        device, dtype = weights.embed.weight.device, weights.embed.weight.dtype
        if slab.config != c or slab.window != c.sliding_window:
            raise StateError("StaticDecodeStep: the slab was built for another config or window")
        if slab.device != device or slab.dtype != dtype:
            raise StateError(f"StaticDecodeStep: the slab holds {slab.dtype} on {slab.device}, "
                             f"the weights {dtype} on {device}")
        self.device = device
        from runtime.kernels.registry import (  # Triton loads only for fused ops
            FAST_NUMERICS_ONLY,
            INVARIANT_REFERENCE,
            KernelRegistry,
        )

        self.ops = KernelRegistry(self.options.kernels, device=device, dtype=dtype)
        self.num = Numerics.for_options(self.options.batch_invariant, gemm=self.ops.fused_or_none("linear"))
        if self.ops.is_fused("engram"):
            # Its id-range check reads the ids on the host (a sync); the hasher's ids are
            # in range by construction, and the kernel reads a zero row for any other.
            self.ops.engram.check_ids = False
        ring = self.ops.is_fused("attention") and self.num.row_tile == 1
        self.kernels_used = {op: (self.ops.selected[op] if op in REGISTRY_OPS else BATCHED_REFERENCE)
                             for op in self.ops.selected}
        if ring:
            self.kernels_used["attention"] = FUSED_RING
        if self.num.row_tile > 1:  # the invariant path's own tiled GEMMs and every-expert MoE
            for op in FAST_NUMERICS_ONLY:
                self.kernels_used[op] = INVARIANT_REFERENCE
        self.quant = self.ops.rope_quant  # the window / global writes' rope + quant
        self.kernels_used["kv_storage"] = self._storage(ring)
        self.ctx = StepContext(c, self.num, None, slab.window, None, self.ops)
        rope = RopePair(c)
        self.rope_main = RopeRows(rope.main, slab.max_len, device)
        self.rope_comp = RopeRows(rope.compress, slab.max_len, device)
        self.hasher = EngramHasher(c, weights.engram_token_map).to(device) if c.engram_layer_ids else None
        # Built once here, not in every step: the key-row ids each index-source ratio's
        # visibility mask compares with.
        self.key_rows = {r: torch.arange(slab.max_len // r, device=device)
                         for r in sorted({c.compress_ratios[c.kv_source_of(i)] for i in c.index_source_layer_ids})}
        if reuse is not None:
            self.stacked, self.fn, self.comp_weights = reuse.stacked, reuse.fn, reuse.comp_weights
            return
        self.stacked = stack_all_layers(weights) if self.num.row_tile == 1 else None
        # decode_compile: RMSNorm, RoPE, the attention core and the grouped MoE through
        # torch.compile (runtime/static/helpers.py); everything else as written.
        self.fn = StepHelpers.build(self.options.decode_compile, device,
                                    fused_attention=self.ops.attention if ring else None)
        self.comp_weights = {
            src: (weights.layers[src].attn.compressor.wkv.weight.float(),
                  weights.layers[src].attn.compressor.wgate.weight.float())
            for src in c.kv_source_layer_ids if c.compress_ratios[src] > 1
        }

    # ------------------------------------------------------------------ the step
    @torch.no_grad()
    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        c, slab, num, w = self.config, self.slab, self.num, self.weights
        if tokens.dim() != 1:
            raise StateError(f"StaticDecodeStep.step: tokens must be a 1-D tensor [B], got {tuple(tokens.shape)}")
        b = tokens.shape[0]
        slab.reserve(b)
        tokens = tokens.to(self.device, torch.int64)
        pos = slab.num_computed[:b].clone()
        floor = slab.window_floor[:b]
        slab.tokens[:b].scatter_(1, pos[:, None], tokens[:, None])
        rows = num.padded_rows(b)
        tok_rows, pos_rows = self._pad(tokens, rows), self._pad(pos, rows)
        hash_ids = self._hash_ids(pos, rows)
        tables = {
            0: (self.rope_main.cos[pos_rows], self.rope_main.sin[pos_rows]),
            1: (self.rope_comp.cos[pos_rows], self.rope_comp.sin[pos_rows]),
        }

        streams = w.embed.weight[tok_rows].unsqueeze(1).expand(-1, c.hc_mult, -1).contiguous()
        pre = first_pre(rows, c.hc_mult, self.device)
        pending = None
        # Per-step indices every layer shares (built once, not per layer):
        window = self.fn.keys.for_window(pos, floor, slab.window, c.head_dim)
        ring_at = (pos % slab.window).view(b, 1, 1)
        comp_cos, comp_sin = self.rope_comp.cos, self.rope_comp.sin
        at_pos = (tables[1][0][:b], tables[1][1][:b])  # ratio 1 groups start at p
        groups = {r: GroupIndex.at(pos, r, comp_cos, comp_sin, at_pos)
                  for r in sorted({c.compress_ratios[s] for s in c.kv_source_layer_ids})}
        visible = {r: Visibility.at(pos, r, rows) for r, rows in self.key_rows.items()}
        shared = _StepShared(b, hash_ids, tables, window, ring_at, groups, visible,
                             {"layout": window, "candidates": None})
        for layer in range(c.num_hidden_layers):
            streams, pending, pre = self._layer(layer, streams, pending, pre, shared)
        streams = expand(pending[0], streams, pending[1])
        hidden = self.fn.rms_norm(collapse(streams, pre), w.norm.weight, c.rms_norm_eps)
        logits = num.linear(hidden[:b], w.head.weight).float()
        slab.num_computed[:b] += 1
        return logits

    # ------------------------------------------------------------------ parts
    def _storage(self, ring: bool) -> str:
        """``kernels_used["kv_storage"]``; a packed slab also sets ``self.quant`` to pack on write."""
        if self.slab.kv_storage == "packed":
            if not ring:
                raise StateError("StaticDecodeStep: the slab holds packed KV, which only the fused ring "
                                 "attention reads (fused attention, fast numerics)")
            self.quant = PackingQuant(self.ops.rope_quant)
            return self.quant.how
        if self.options.kv_storage == "packed":
            return "dequantized (kv_storage = packed asked, but this slab is not packed)"
        return "dequantized"

    def _layer(self, layer: int, streams: torch.Tensor, pending, pre, shared: _StepShared):
        """One decoder layer of the step (its own method so a profiler can put a range
        around each layer: benchmarks/step_ops.py). -> (streams, pending, pre)."""
        c, slab, w = self.config, self.slab, self.weights
        b = shared.b
        lw = w.layers[layer]
        if layer in c.engram_layer_ids:
            if pending is not None:
                streams, pending = expand(pending[0], streams, pending[1]), None
            k = c.engram_layer_ids.index(layer)
            streams = self.ops.engram(streams, shared.hash_ids[:, k], lw.engram, c, self.num)
        streams, mix_a, x = mhc_site(streams, pending, pre, lw, "attn", lw.attn_norm.weight, self.ctx)
        if layer in c.kv_source_layer_ids:
            update_kv_source(slab, layer, x[:b], shared.groups[c.compress_ratios[layer]], lw, c, self.num,
                             self.ops, self.comp_weights.get(layer), self.quant)
        attn_out = self._attention(layer, x, shared, lw)
        streams, mix_f, f_in = mhc_site(streams, (attn_out, mix_a), mix_a.pre, lw, "ffn",
                                        lw.ffn_norm.weight, self.ctx)
        return streams, (self._moe(layer, f_in, lw.ffn), mix_f), mix_f.pre

    def _pad(self, values: torch.Tensor, rows: int) -> torch.Tensor:
        """Dummy rows (token 0, position 0) up to the numerics' row count, as the engine pads."""
        if rows == values.shape[0]:
            return values
        return torch.cat([values, values.new_zeros(rows - values.shape[0])])

    def _hash_ids(self, pos: torch.Tensor, rows: int) -> torch.Tensor | None:
        """Engram row ids [rows, n_engram_layers, cols] of each slot's n-gram ending at its
        position, read from the slab's tokens (dummy rows: id 0, as the engine's)."""
        if self.hasher is None:
            return None
        h, b = self.hasher, pos.shape[0]
        back = pos[:, None] - torch.arange(h.max_ngram, device=pos.device)[None, :]  # [B, N]
        grams = h.compress(self.slab.tokens[:b].gather(1, back.clamp_min(0)))
        grams = torch.where(back < 0, torch.full_like(grams, h.pad_id), grams)
        ids = h.hash_grams(grams)  # [B, L, cols]
        if rows > b:
            ids = torch.cat([ids, ids.new_zeros(rows - b, *ids.shape[1:])])
        return ids

    def _attention(self, layer: int, x: torch.Tensor, shared: _StepShared, lw) -> torch.Tensor:
        """runtime.layer.attention for one token per slot: window KV into the ring, the
        index source's selection (its key layout kept in ``selection`` for the layers
        that follow), the batched sparse attention and the output projection."""
        c, num, slab = self.config, self.num, self.slab
        a = lw.attn
        b, selection, window = shared.b, shared.selection, shared.window
        ratio = c.compress_ratios[layer]
        eps = c.rms_norm_eps
        q_r = self.fn.rms_norm(num.linear(x, a.wq_a.weight), a.q_norm.weight, eps)
        q = num.linear(q_r, a.wq_b.weight).reshape(-1, c.num_attention_heads, c.head_dim)
        kv = self.fn.rms_norm(num.linear(x, a.wkv.weight), a.kv_norm.weight, eps)
        cos, sin = shared.tables[1 if ratio > 0 else 0]
        q = self.fn.apply_rope(q, cos, sin)
        kv = self.quant(kv, cos, sin, "fp8")
        ring = slot_rows(slab.swa[layer], b)
        write_rows(ring, shared.ring_at, slot_rows(kv, b))
        src = c.kv_source_of(layer)
        if layer in c.index_source_layer_ids:
            cos_c, sin_c = shared.tables[1]
            topk, selection["candidates"] = select(
                layer, q_r, x, cos_c, sin_c, shared.visible[c.compress_ratios[src]], slab.index_keys[src][:b],
                selection["candidates"], lw, c, num, self.ops)
            selection["layout"] = window.with_topk(topk)
        if src is None:
            core = self.fn.attention(q[:b], ring, None, window, a.attn_sink, num)
        else:
            core = self.fn.attention(q[:b], ring, slot_rows(slab.global_kv[src], b), selection["layout"],
                                     a.attn_sink, num)
        out = core if q.shape[0] == b else torch.cat([core, core.new_zeros(q.shape[0] - b, *core.shape[1:])])
        return output_projection(out, cos, sin, a, c.o_groups, num, x.dtype, inv_rope=self.ops.inv_rope)

    def _moe(self, layer: int, x: torch.Tensor, ffn) -> torch.Tensor:
        if self.stacked is None:
            return every_expert_moe(x, ffn, self.config, self.num, route_fn=self.ops.gate)
        return self.fn.grouped_moe(x, ffn, self.stacked[layer], self.config, self.num, route_fn=self.ops.gate,
                                   experts_fn=self.ops.experts)
