"""One V4.1 layer over a packed row set: Engram, mHC sites, CSA2 attention, MoE.

    X <- Engram(X)                                   (engram layers)
    mix_a = mHC(X); x = attn_norm(collapse(X, pre_in))
    [KV source] compressor + indexer keys from x     (rows >= the state's write floor)
    [cut "at"] trim the rows here
    X <- expand(Attention(x), X, mix_a)
    mix_f = mHC(X); X <- expand(MoE(ffn_norm(collapse(X, mix_a.pre))), X, mix_f)
    pre_in <- mix_f.pre

The ops that have fused twins (mhc site, gate, indexer logits, top-k, sparse attention,
inverse RoPE) are called through ``ctx.ops`` (runtime.kernels.KernelRegistry, chosen
once per model from ``RuntimeOptions.kernels``). The mHC op folds the previous
sublayer's expand into the next site ("Mega-mHC" scope), so a layer returns its FFN
output still pending: ``pending = (ffn_out, mix_f)`` is applied by the next site.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from runtime.attention import output_projection
from runtime.compressor import compress_rows, entries_from_latents
from runtime.config import V41Config
from runtime.indexer import (
    blocks_to_mask,
    candidate_blocks,
    visible_counts,
)
from runtime.mhc import HcMix, expand
from runtime.moe import moe
from runtime.numerics import Numerics, rms_norm
from runtime.rope import RopePair, apply_rope
from runtime.rows import RowSet

INDEX_QUERY_BLOCK = 512  # queries scored at once (a multiple of the row tile)


@dataclass
class StepContext:
    config: V41Config
    num: Numerics
    rope: RopePair
    window: int
    hash_ids: torch.Tensor | None  # [R, n_engram_layers, cols] for the full row set
    ops: object  # runtime.kernels.KernelRegistry


Pending = tuple  # (sublayer output [R, D], HcMix) not yet expanded into the streams


def mhc_site(streams, pending: Pending | None, pre_shift, lw, site: str, norm_weight, ctx: StepContext):
    """Apply the pending expand, compute this site's mix, collapse with ``pre_shift`` and
    normalise: -> (streams, mix, sublayer input)."""
    out, prev = pending if pending is not None else (None, None)
    return ctx.ops.mhc(
        streams, out, prev, pre_shift, getattr(lw, f"hc_{site}_fn"), getattr(lw, f"hc_{site}_base"),
        getattr(lw, f"hc_{site}_scale"), norm_weight, ctx.config, ctx.num,
    )


def update_kv_source(layer: int, x: torch.Tensor, rows: RowSet, lw, ctx: StepContext) -> None:
    """Run the compressor and indexer-key path of KV source ``layer`` on every row that
    is not a replayed position; append completed entries to each request's state."""
    c = ctx.config
    ratio = c.compress_ratios[layer]
    comp = lw.attn.compressor
    for seg in rows.segments:
        st = seg.state
        fresh = seg.positions >= st.write_floor
        if not bool(fresh.any()):
            continue
        first = int(fresh.nonzero()[0, 0])
        xs = x[seg.row0 + first : seg.row0 + seg.n]
        first_pos = int(seg.positions[first])
        buffered = st.comp_buffer.get(layer)
        expected = st.global_kv[layer].shape[0] * ratio + (buffered[0].shape[0] if buffered else 0)
        if first_pos != expected:
            raise AssertionError(f"compressor of layer {layer} at {expected}, rows start at {first_pos}")
        latent, group_pos, rest = compress_rows(xs, first_pos, buffered, comp, ratio, c, ctx.num,
                                                  pool=ctx.ops.compress)
        if rest is not None:
            st.comp_buffer[layer] = rest
        if latent is None:
            continue
        entries, keys = entries_from_latents(latent, group_pos, ratio, lw.attn, c, ctx.rope, ctx.num,
                                             rope_quant=ctx.ops.rope_quant)
        st.global_kv[layer] = torch.cat([st.global_kv[layer], entries.to(st.dtype)])
        st.index_keys[layer] = torch.cat([st.index_keys[layer], keys.to(st.dtype)])


def run_indexer(layer: int, q_r: torch.Tensor, x: torch.Tensor, cos_c, sin_c, rows: RowSet, lw,
                ctx: StepContext) -> None:
    """Publish this index source's top-k (and, at the candidate source, the candidate
    mask) on every segment."""
    c, num = ctx.config, ctx.num
    idx_w = lw.attn.indexer
    src = c.kv_source_of(layer)
    ratio = c.compress_ratios[layer]
    q = num.linear(q_r, idx_w.wq_b.weight).reshape(-1, c.index_n_heads, c.index_head_dim)
    q = ctx.ops.rope_quant(q, cos_c, sin_c, "mxfp4")
    head_w = num.linear(x, idx_w.weights_proj.weight).float() * c.index_n_heads**-0.5
    is_candidate_source = layer == c.candidate_source_layer_id
    uses_candidates = 0 <= c.candidate_source_layer_id < layer
    for seg in rows.segments:
        keys = seg.state.index_keys[src]
        if keys.shape[0] == 0:
            seg.topk = torch.full((seg.n, c.index_topk), -1, dtype=torch.int64, device=x.device)
            if is_candidate_source:
                seg.candidates = torch.full((seg.n, c.candidate_topk_blocks), -1, dtype=torch.int64,
                                            device=x.device)
            continue
        topk, blocks = [], []
        # Query blocks bound the [rows, entries] score matrix; rows never interact.
        for s in range(0, seg.n, INDEX_QUERY_BLOCK):
            e = min(seg.n, s + INDEX_QUERY_BLOCK)
            rows_ = slice(seg.row0 + s, seg.row0 + e)
            counts = visible_counts(seg.positions[s:e], ratio)
            scores = ctx.ops.indexer(q[rows_], head_w[rows_], keys, counts, num)
            if is_candidate_source:
                blocks.append(candidate_blocks(scores, counts, c.candidate_topk_blocks, c.candidate_block_size))
            elif uses_candidates and seg.candidates is not None:
                allowed = blocks_to_mask(seg.candidates[s:e], scores.shape[1], c.candidate_block_size)
                scores = scores.masked_fill(~allowed, float("-inf"))
            topk.append(ctx.ops.topk(scores, c.index_topk))
        seg.topk = torch.cat(topk)
        if is_candidate_source:
            seg.candidates = torch.cat(blocks)


def attention(layer: int, x: torch.Tensor, rows: RowSet, lw, ctx: StepContext) -> torch.Tensor:
    """x [R, D] (attn_norm output) -> attention output [R, D]; writes window KV."""
    c, num = ctx.config, ctx.num
    a = lw.attn
    ratio = c.compress_ratios[layer]
    q_r = rms_norm(num.linear(x, a.wq_a.weight), a.q_norm.weight, c.rms_norm_eps)
    q = num.linear(q_r, a.wq_b.weight).reshape(-1, c.num_attention_heads, c.head_dim)
    kv = rms_norm(num.linear(x, a.wkv.weight), a.kv_norm.weight, c.rms_norm_eps)
    cos, sin = ctx.rope.table(ratio).lookup(rows.positions, x.device)
    q = apply_rope(q, cos, sin)
    kv = ctx.ops.rope_quant(kv, cos, sin, "fp8")
    for seg in rows.segments:
        seg.state.swa[layer][seg.positions] = kv[seg.rows].to(seg.state.dtype)
    if layer in c.index_source_layer_ids:
        cos_c, sin_c = ctx.rope.compress.lookup(rows.positions, x.device)
        run_indexer(layer, q_r, x, cos_c, sin_c, rows, lw, ctx)
    out = torch.zeros(rows.total, c.num_attention_heads, c.head_dim, dtype=torch.float32, device=x.device)
    src = c.kv_source_of(layer)
    for seg in rows.segments:
        st = seg.state
        compressed, topk = None, None
        if src is not None:
            compressed = st.global_kv[src]
            if compressed.shape[0] == 0:
                compressed = compressed.new_zeros(1, c.head_dim)
            topk = seg.topk
        floor = torch.full_like(seg.positions, seg.floor)
        out[seg.rows] = ctx.ops.attention(
            q[seg.rows], seg.positions, floor, st.swa[layer], ctx.window, compressed, topk,
            a.attn_sink, num,
        )
    return output_projection(out, cos, sin, a, c.o_groups, num, x.dtype, inv_rope=ctx.ops.inv_rope)


def run_layer(
    layer: int,
    streams: torch.Tensor,
    pending: Pending | None,
    pre_in: torch.Tensor,
    rows: RowSet,
    lw,
    ctx: StepContext,
    trim_here: Callable[[RowSet], tuple[RowSet, torch.Tensor]] | None = None,
) -> tuple[torch.Tensor, Pending, torch.Tensor, RowSet]:
    """One layer -> (streams, pending FFN expand, pre for the next site, rows).
    ``trim_here`` (cut "at") trims the rows after the KV-source update."""
    c = ctx.config
    if layer in c.engram_layer_ids:
        if pending is not None:  # Engram reads the fully expanded streams
            streams, pending = expand(pending[0], streams, pending[1]), None
        k = c.engram_layer_ids.index(layer)
        streams = ctx.ops.engram(streams, ctx.hash_ids[:, k], lw.engram, c, ctx.num)
    streams, mix_a, x = mhc_site(streams, pending, pre_in, lw, "attn", lw.attn_norm.weight, ctx)
    if layer in c.kv_source_layer_ids:
        update_kv_source(layer, x, rows, lw, ctx)
    if trim_here is not None:
        rows, index = trim_here(rows)
        streams, x, mix_a = streams[index], x[index], select_rows(mix_a, index)
    attn_out = attention(layer, x, rows, lw, ctx)
    streams, mix_f, f_in = mhc_site(streams, (attn_out, mix_a), mix_a.pre, lw, "ffn", lw.ffn_norm.weight, ctx)
    ffn_out = moe(f_in, lw.ffn, c, ctx.num, route_fn=ctx.ops.gate)
    return streams, (ffn_out, mix_f), mix_f.pre, rows


def select_rows(mix: HcMix, index: torch.Tensor) -> HcMix:
    return HcMix(mix.pre[index], mix.post[index], mix.comb[index])
