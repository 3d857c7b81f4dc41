"""The attention sublayer of one layer on a [B, T] batch: the KV source's compressor,
the window KV, the indexer, CSA2 attention and the grouped output projection.

What one layer leaves for later layers lives in ``CsaState``: each KV source's entries
and index keys, the latest index source's top-k, the candidate blocks, and the indexer
losses collected so far (the runtime keeps the same things per request in its
``SequenceState`` and ``Segment``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from runtime.attention import output_projection
from runtime.batched.attention import engine_layout_attention, sparse_attention
from runtime.batched.common import RopeRows
from runtime.batched.compressor import compress
from runtime.batched.indexer import index_queries, indexer_kl, select, selected_scores
from runtime.batched.rounding import round_to
from runtime.config import V41Config
from runtime.numerics import Numerics, rms_norm
from runtime.rope import apply_rope


@dataclass
class CsaState:
    entries: dict[int, torch.Tensor] = field(default_factory=dict)  # KV source -> [B, N, hd] NVFP4
    keys: dict[int, torch.Tensor] = field(default_factory=dict)  # KV source -> [B, N, dI] MXFP4
    topk: torch.Tensor | None = None  # [B, T, index_topk] of the latest index source
    candidates: torch.Tensor | None = None  # [B*T, candidate_topk_blocks] of the candidate source
    losses: list[torch.Tensor] = field(default_factory=list)  # DSA KL per index source


def attention_sublayer(layer: int, x: torch.Tensor, shape: tuple[int, int], lw, config: V41Config,
                       ropes: tuple[RopeRows, RopeRows], num: Numerics, csa: CsaState,
                       straight_through: bool, engine_layout: bool = False, start: int = 0,
                       indexer_loss: bool = True) -> torch.Tensor:
    """x [R, D] (attn_norm output, R = B*T) -> attention output [R, D]; updates ``csa``.
    ropes = (main, compress); engine_layout: the parity mode's per-request attention.

    ``start`` > 0 (a decoder-trimmed prefill, ``runtime.batched.prefill``): the T rows
    of each sequence are its positions start .. start+T-1 and the window reads stop at
    ``start`` (the engine's trimmed floor, chunk_end - W); the top-k in ``csa`` is
    already cut to those rows. A KV source whose entries ``csa`` already holds (cut "at":
    the encoder ran its compressor on every row) does not compress again.
    ``indexer_loss=False`` skips the DSA loss (inference has no use for it)."""
    c = config
    b, t = shape
    rows = b * t
    eps = c.rms_norm_eps
    ratio = c.compress_ratios[layer]
    a = lw.attn
    rope_main, rope_compress = ropes
    cos, sin = (rope_compress if ratio > 0 else rope_main).rows(t, x.device, start=start)  # [T, rope/2]
    if layer in c.kv_source_layer_ids and layer not in csa.entries:
        if start:
            raise ValueError(f"batched forward: KV source {layer} cannot compress from trimmed rows")
        csa.entries[layer], csa.keys[layer] = compress(x.reshape(b, t, -1), ratio, a, c, rope_compress, num,
                                                       straight_through)
    q_r = rms_norm(num.linear(x, a.wq_a.weight), a.q_norm.weight, eps)  # [R, q_rank]
    q = num.linear(q_r, a.wq_b.weight).reshape(b, t, c.num_attention_heads, c.head_dim)
    q = apply_rope(q, cos[None], sin[None])
    kv = rms_norm(num.linear(x, a.wkv.weight), a.kv_norm.weight, eps).reshape(b, t, -1)
    kv = round_to(apply_rope(kv, cos[None], sin[None]), "fp8", straight_through)  # [B, T, hd]
    src = c.kv_source_of(layer)
    queries = None
    if layer in c.index_source_layer_ids:  # the indexer reads detached inputs (DSA)
        queries = index_queries(q_r.detach().reshape(b, t, -1), x.detach().reshape(b, t, -1), a.indexer, c,
                                cos, sin, num, straight_through)
        csa.topk, csa.candidates = select(*queries, csa.keys[src], ratio, layer, csa.candidates, c, num,
                                          start=start)
    entries = None if src is None else csa.entries[src].float()
    topk = None if src is None else csa.topk
    if engine_layout:
        out, p_comp = engine_layout_attention(q.float(), kv.float(), c.sliding_window, entries, topk,
                                              a.attn_sink, num, start=start)
    else:
        out, p_comp = sparse_attention(q.float(), kv.float(), c.sliding_window, entries, topk, a.attn_sink)
    if indexer_loss and queries is not None and p_comp is not None:
        csa.losses.append(indexer_kl(selected_scores(*queries, csa.keys[src], csa.topk), p_comp, csa.topk))
    cos_rows = cos.expand(b, t, -1).reshape(rows, -1)
    sin_rows = sin.expand(b, t, -1).reshape(rows, -1)
    return output_projection(out.reshape(rows, c.num_attention_heads, c.head_dim), cos_rows, sin_rows, a,
                             c.o_groups, num, x.dtype)
