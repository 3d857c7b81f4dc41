"""Single-pass manifold-constrained hyper-connections (mHC) of V4.1.

The residual stream is X [T, hc, D] (hc = 4 copies). At each site (attention, FFN) one
projection of the RMS-normalised flattened stream gives 2*hc + hc*hc numbers:

    pre  = sigmoid(m[:hc] * s0 + b[:hc]) + hc_eps            (how to collapse X)
    post = 2 * sigmoid(m[hc:2hc] * s1 + b[hc:2hc])            (where the output goes)
    comb = Sinkhorn(softmax_row(m[2hc:] * s2 + b[2hc:]))     (how streams mix, [hc, hc])

"Delayed pre": a site's ``pre`` is used by the NEXT site (attention collapses with the
previous FFN's pre, the FFN with the attention's).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runtime.numerics import Numerics, rms_norm


@dataclass
class HcMix:
    pre: torch.Tensor  # [T, hc] float32
    post: torch.Tensor  # [T, hc] float32
    comb: torch.Tensor  # [T, hc, hc] float32, comb[t, j, k]: source j -> destination k


def sinkhorn(logits: torch.Tensor, iters: int, eps: float) -> torch.Tensor:
    """[..., n, n] logits -> nearly doubly-stochastic matrix: a row softmax (+eps), a
    column normalisation, then ``iters - 1`` rounds of (row, column) normalisation.

    Out of place, so autograd can differentiate it (runtime.batched trains through it)."""
    m = torch.softmax(logits, dim=-1) + eps
    m = m / (m.sum(dim=-2, keepdim=True) + eps)
    for _ in range(iters - 1):
        m = m / (m.sum(dim=-1, keepdim=True) + eps)
        m = m / (m.sum(dim=-2, keepdim=True) + eps)
    return m


def hc_mix(
    streams: torch.Tensor,
    fn: torch.Tensor,
    base: torch.Tensor,
    scale: torch.Tensor,
    *,
    norm_eps: float,
    hc_eps: float,
    sinkhorn_iters: int,
    num: Numerics,
) -> HcMix:
    """Coefficients of one site from its input streams [T, hc, D]."""
    t, hc, _ = streams.shape
    flat = rms_norm(streams.reshape(t, -1).float(), None, norm_eps)  # [T, hc*D]
    m = num.linear(flat, fn.float())  # [T, 2hc + hc*hc]
    pre = torch.sigmoid(m[:, :hc] * scale[0] + base[:hc]) + hc_eps
    post = 2.0 * torch.sigmoid(m[:, hc : 2 * hc] * scale[1] + base[hc : 2 * hc])
    comb_logits = (m[:, 2 * hc :] * scale[2] + base[2 * hc :]).reshape(t, hc, hc)
    return HcMix(pre, post, sinkhorn(comb_logits, sinkhorn_iters, hc_eps))


def collapse(streams: torch.Tensor, pre: torch.Tensor) -> torch.Tensor:
    """x = sum_k pre_k * X_k -> [T, D] in the streams' dtype."""
    return (pre.unsqueeze(-1) * streams.float()).sum(dim=1).to(streams.dtype)


def expand(out: torch.Tensor, streams: torch.Tensor, mix: HcMix) -> torch.Tensor:
    """X'_k = post_k * out + sum_j comb[j, k] * X_j -> [T, hc, D]."""
    # [T, k, j, 1] * [T, 1, j, D] summed over j: each output sums its 4 terms in j order.
    mixed = (mix.comb.transpose(1, 2).unsqueeze(-1) * streams.float().unsqueeze(1)).sum(dim=2)
    new = mix.post.unsqueeze(-1) * out.float().unsqueeze(1) + mixed
    return new.to(streams.dtype)


def first_pre(rows: int, hc: int, device: torch.device) -> torch.Tensor:
    """Layer 0's delayed pre: one-hot on stream 0, which collapses to the embedding."""
    pre = torch.zeros(rows, hc, dtype=torch.float32, device=device)
    pre[:, 0] = 1.0
    return pre
