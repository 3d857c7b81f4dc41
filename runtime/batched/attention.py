"""CSA2 sparse attention on a [B, T] batch: one softmax over a query's sliding window and
its top-k compressed entries, with the per-head sink (``runtime.attention`` math).

For the query at position p the keys are the window KV at p-W+1 .. p (>= 0) and the
global entries of its top-k ids (-1 = empty slot); logits = q.k / sqrt(hd); the sink
adds exp(sink_h) to the denominator only. K = V = the shared latent (one KV head).

Form chosen for a GPU (fixed shapes, no gathers of windows): the window part runs on
blocks of W queries, each against its own block and the previous one (2W keys, a static
band mask); the compressed part gathers the K selected entries per query. Both logit
sets go through one softmax, so the math is the runtime's single softmax.
"""

from __future__ import annotations

import torch

from runtime import attention as runtime_attention
from runtime.numerics import Numerics

NEG_INF = float("-inf")


def band_mask(n_blocks: int, window: int, device: torch.device) -> torch.Tensor:
    """bool [n_blocks, W, 2W]: query i of block n sees key k of (previous block, this
    block) iff its position n*W + k - W lies in (n*W + i - W, n*W + i] and is >= 0."""
    i = torch.arange(window, device=device)[:, None]
    k = torch.arange(2 * window, device=device)[None, :]
    band = (k > i) & (k <= i + window)  # [W, 2W]
    first = torch.arange(n_blocks, device=device)[:, None, None] == 0
    return band[None] & ~(first & (k[None] < window))


def sparse_attention(q: torch.Tensor, kv: torch.Tensor, window: int, entries: torch.Tensor | None,
                     topk: torch.Tensor | None, sink: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """q [B, T, H, hd] (RoPE'd), kv [B, T, hd] (window KV, FP8-rounded), entries [B, N, hd]
    (NVFP4 global KV), topk [B, T, K] -> (output [B, T, H, hd], the probabilities of the
    compressed keys [B, T, H, K] or None)."""
    b, t, n_heads, hd = q.shape
    scale = hd**-0.5
    n_blocks = -(-t // window)
    pad = n_blocks * window - t
    if pad:  # padded queries and keys sit after every real position: never visible
        q = torch.cat([q, q.new_zeros(b, pad, n_heads, hd)], dim=1)
        kv = torch.cat([kv, kv.new_zeros(b, pad, hd)], dim=1)
    qb = q.reshape(b, n_blocks, window, n_heads, hd)
    kb = kv.reshape(b, n_blocks, window, hd)
    keys = torch.cat([torch.cat([kb.new_zeros(b, 1, window, hd), kb[:, :-1]], dim=1), kb], dim=2)
    win = torch.einsum("bnqhd,bnkd->bnqhk", qb, keys) * scale  # [B, nb, W, H, 2W]
    allowed = band_mask(n_blocks, window, q.device)[None, :, :, None, :]
    win = win.masked_fill(~allowed, NEG_INF).reshape(b, n_blocks * window, n_heads, 2 * window)[:, :t]
    parts = [win.float()]
    picked = None
    if topk is not None:
        if entries.shape[1] == 0:  # no completed group yet (T < ratio): every slot is empty
            entries = entries.new_zeros(b, 1, hd)
        k = topk.shape[-1]
        idx = topk.clamp_min(0).reshape(b, t * k, 1).expand(-1, -1, hd)
        picked = entries.gather(1, idx).reshape(b, t, k, hd)  # [B, T, K, hd]
        comp = torch.einsum("bthd,btkd->bthk", q[:, :t], picked) * scale
        parts.append(comp.float().masked_fill((topk < 0)[:, :, None, :], NEG_INF))
    parts.append(sink.float().view(1, 1, n_heads, 1).expand(b, t, n_heads, 1))
    probs = torch.softmax(torch.cat(parts, dim=-1), dim=-1)  # [B, T, H, 2W (+K) + 1]
    p_win = probs[..., : 2 * window]
    if pad:
        p_win = torch.cat([p_win, p_win.new_zeros(b, pad, n_heads, 2 * window)], dim=1)
    p_win = p_win.reshape(b, n_blocks, window, n_heads, 2 * window).to(keys.dtype)
    out = torch.einsum("bnqhk,bnkd->bnqhd", p_win, keys).reshape(b, n_blocks * window, n_heads, hd)[:, :t]
    if picked is None:
        return out.float(), None
    p_comp = probs[..., 2 * window : -1]  # [B, T, H, K]
    out = out.float() + torch.einsum("bthk,btkd->bthd", p_comp.to(picked.dtype), picked).float()
    return out, p_comp


def engine_layout_attention(q: torch.Tensor, kv: torch.Tensor, window: int, entries: torch.Tensor | None,
                            topk: torch.Tensor | None, sink: torch.Tensor,
                            num: Numerics, start: int = 0) -> tuple[torch.Tensor, None]:
    """The same attention through the engine's own per-request function, row by row (a
    Python loop over B: for the parity test's row-invariant mode only, never for training).

    On CPU float32 a different reduction layout changes last bits, and the model's own
    roundings (FP8, NVFP4, MXFP4) turn a last-bit difference at a rounding boundary into a
    whole step that later layers amplify; with the engine's layout and row tiles the
    batched forward matches the engine's batch-invariant mode on any draw. The fast form
    above is held to this one op by op in the tests.

    ``start`` > 0: the rows are positions start .. start+T-1 of a decoder-trimmed
    prefill, window reads clamped at ``start`` (the engine's trimmed floor); the window
    KV goes to the engine's by-position layout, zeros below the floor (never read)."""
    b, t = q.shape[:2]
    positions = torch.arange(start, start + t, device=q.device)
    floor = torch.full_like(positions, start)
    if start:
        kv = torch.cat([kv.new_zeros(b, start, kv.shape[-1]), kv], dim=1)
    outs = [
        runtime_attention.sparse_attention(
            q[i], positions, floor, kv[i], window, None if entries is None else entries[i],
            None if topk is None else topk[i], sink, num,
        )
        for i in range(b)
    ]
    return torch.stack(outs), None
