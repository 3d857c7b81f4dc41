"""Engram: hashed n-gram memory gated into the hyper-connection streams (layers
``engram_layer_ids``).

Hashing (per engram layer, per position p): the compressed ids of tokens p, p-1, ...,
p-(N-1) (a slot before the sequence start is the pad id, and so is every slot after
it); rolling = t0*m0, then rolling ^= t_i*m_i for i = 1..N-1, and after folding t_i
``rolling mod prime[i-1][head] + offset`` is the (i+1)-gram's row for that head. The
multipliers are odd int64s from ``np.random.default_rng(10007 * layer_id)``, bounded by
the compressed vocabulary's size; the primes and offsets come from the config's bucket
layout. Token ids become compressed ids through a ``CompressedTokenMap``
(``runtime/engram_map.py``): the release tokenizer's map where the checkpoint has one,
else the identity of the toolkit's small vocabularies; the pad id is the compressed id
of ``engram_pad_id``. Look-back reads the request's token history, so n-grams cross
chunk boundaries exactly.
"""

from __future__ import annotations

import numpy as np
import torch

from runtime.config import V41Config, engram_primes
from runtime.engram_map import CompressedTokenMap, identity_token_map
from runtime.errors import ConfigError
from runtime.numerics import Numerics

GATE_CLAMP = 1e-6


def hash_multipliers(layer_ids: tuple[int, ...], max_ngram: int, compressed_vocab: int) -> torch.Tensor:
    """[n_layers, max_ngram] odd int64 multipliers, bounded so id * m cannot overflow."""
    bound = max(1, (np.iinfo(np.int64).max // compressed_vocab) // 2)
    rows = []
    for layer_id in layer_ids:
        rng = np.random.default_rng(10007 * layer_id)
        rows.append(rng.integers(low=0, high=bound, size=(max_ngram,), dtype=np.int64) * 2 + 1)
    return torch.from_numpy(np.stack(rows))


class EngramHasher:
    """Hash ids of every engram layer for a batch of positions of one request.

    ``token_map`` None means the identity map, which only a vocabulary no larger than
    the compressed one may use (a one-line ConfigError otherwise)."""

    def __init__(self, config: V41Config, token_map: CompressedTokenMap | None = None):
        token_map = token_map if token_map is not None else identity_token_map(config)
        if token_map.size != config.engram_compressed_vocab_size or token_map.ids.shape != (
                config.vocab_size,):
            raise ConfigError(
                f"{token_map.source}: a compressed token map of {token_map.ids.numel()} tokens to "
                f"{token_map.size} ids, expected vocab_size {config.vocab_size} to "
                f"engram_compressed_vocab_size {config.engram_compressed_vocab_size}"
            )
        if config.engram_pad_id >= config.vocab_size:
            raise ConfigError(f"engram_pad_id: {config.engram_pad_id} is not a token id "
                              f"(vocab_size {config.vocab_size})")
        self.token_ids = token_map.ids  # [vocab] token id -> compressed id
        self.max_ngram = config.engram_max_ngram_size
        self.pad_id = int(token_map.ids[config.engram_pad_id])
        primes = engram_primes(config)  # [L][N-1][heads]
        self.primes = torch.tensor(primes, dtype=torch.int64)  # [L, N-1, H]
        flat = self.primes.reshape(len(primes), -1)
        self.offsets = torch.cumsum(flat, dim=1) - flat  # [L, (N-1)*H], exclusive prefix sums
        self.multipliers = hash_multipliers(
            config.engram_layer_ids, self.max_ngram, token_map.size
        )  # [L, N]

    def compress(self, tokens: torch.Tensor) -> torch.Tensor:
        """Token ids (any shape) -> compressed ids."""
        return self.token_ids[tokens]

    def __call__(self, history: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """history: int64 [>= max(positions)+1] token ids; positions [T].
        Returns int64 [T, L, (N-1)*H] row ids into each layer's table."""
        pos = positions.long().to(history.device)
        if self.primes.device != history.device:
            self.to(history.device)
        blocked = torch.zeros_like(pos, dtype=torch.bool)
        grams = []
        for shift in range(self.max_ngram):
            back = pos - shift
            source = self.compress(history[back.clamp_min(0)])
            blocked = blocked | (back < 0)
            grams.append(torch.where(blocked, torch.full_like(source, self.pad_id), source))
        return self.hash_grams(torch.stack(grams, dim=-1))  # ids [T, N]

    def to(self, device: torch.device | str) -> EngramHasher:
        """Move the hash tables (primes, offsets, multipliers, token map) to ``device``."""
        self.token_ids = self.token_ids.to(device)
        self.primes = self.primes.to(device)
        self.offsets = self.offsets.to(device)
        self.multipliers = self.multipliers.to(device)
        return self

    def hash_grams(self, ids: torch.Tensor) -> torch.Tensor:
        """ids int64 [..., N] (compressed ids of token p, p-1, ..., pad-filled) -> row ids
        [..., L, (N-1)*H].
        Any leading dims: runtime.batched hashes a whole [B, T] batch in one call."""
        products = ids[..., None, :] * self.multipliers  # [..., L, N]
        rolling = products[..., 0]
        cols = []
        for i in range(1, self.max_ngram):
            rolling = torch.bitwise_xor(rolling, products[..., i])
            cols.append(rolling[..., None] % self.primes[:, i - 1])  # [..., L, H]
        return torch.cat(cols, dim=-1) + self.offsets


def engram(streams: torch.Tensor, hash_ids: torch.Tensor, w, config: V41Config,
           num: Numerics) -> torch.Tensor:
    """streams [T, hc, D], hash_ids [T, (N-1)*H] -> streams with the gated value added.

    e = concat of the looked-up rows -> wkv -> (one key per stream, one shared value);
    gate_s = sigmoid(signed_sqrt(<X_s, q*k weight * key_s> * rstd(X_s) * rstd(key_s) / sqrt(D)))
    """
    t, hc, d = streams.shape
    rows = w.embed.weight[hash_ids]  # [T, cols, head_dim]
    kv = num.linear(rows.flatten(1), w.wkv.weight)  # [T, (hc+1)*D]
    key = kv[:, : hc * d].float().reshape(t, hc, d)
    value = kv[:, hc * d :].float()  # [T, D]
    weight = w.q_weight.float() * w.k_weight.float()  # [hc, D]
    h = streams.float()
    eps = config.rms_norm_eps
    rstd = torch.rsqrt(h.pow(2).mean(-1) + eps) * torch.rsqrt(key.pow(2).mean(-1) + eps)  # [T, hc]
    dot = (h * weight * key).sum(-1) * rstd * d**-0.5
    gate = torch.sigmoid(torch.copysign(dot.abs().clamp_min(GATE_CLAMP).sqrt(), dot))
    return (h + gate.unsqueeze(-1) * value.unsqueeze(1)).to(streams.dtype)
