"""Engram hash ids for a [B, T] batch: the n-gram look-back of every row in one go.

The n-gram at position p is the compressed ids of (token p, p-1, ..., p-(N-1)) with
the (compressed) pad id for slots before the row's start, exactly the runtime's
look-back for a cold request; the hashing itself is the runtime's
``EngramHasher.hash_grams``.
"""

from __future__ import annotations

import torch

from runtime.engram import EngramHasher


def ngram_ids(tokens: torch.Tensor, max_ngram: int, pad_id: int) -> torch.Tensor:
    """tokens int64 [B, T] -> [B, T, N]: column s holds token p - s (pad id if p - s < 0)."""
    b, t = tokens.shape
    cols = [tokens]
    for shift in range(1, max_ngram):
        pad = tokens.new_full((b, min(shift, t)), pad_id)
        cols.append(torch.cat([pad, tokens[:, : t - shift]], dim=1)[:, :t])
    return torch.stack(cols, dim=-1)


def batch_hash_ids(hasher: EngramHasher, tokens: torch.Tensor) -> torch.Tensor:
    """tokens [B, T] -> row ids [B*T, n_engram_layers, (N-1)*heads]."""
    ids = ngram_ids(hasher.compress(tokens), hasher.max_ngram, hasher.pad_id)
    return hasher.hash_grams(ids).reshape(tokens.shape[0] * tokens.shape[1], *hasher.offsets.shape)
