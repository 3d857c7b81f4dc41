"""A cold prefill on fixed [B, T] shapes, optionally decoder-trimmed, in two segments that
can each be captured in a CUDA graph.

Why: the engine's prefill (``runtime.model.V41Model``) walks per-request segments in
Python, grows caches by concatenation and syncs with the host, so on a GPU a 1k-token
prefill of ``mid`` is bound by the host and the decoder trim's saving hides behind it
(issue 15; benchmarks/results/prefill-mid-cuda.md). The batched forward
(``BatchedV41``) computes the same math with no host syncs and fixed shapes; this module
cuts it at the decoder-trim layer::

    prefill = BatchedPrefill(weights, trim=True, cut="after")
    enc = prefill.encoder(tokens)     # tokens int64 [B, T]: layers 0 .. cut-1 on all rows
    logits = prefill.decoder(enc)     # float32 [B, vocab]: the layers from the cut, last position

``encoder`` returns an ``Encoded`` (tensors only, shapes fixed by [B, T]) and ``decoder``
reads nothing else, so each call can be captured on its own (``torch.cuda.CUDAGraph``:
capture ``enc = encoder(static_tokens)``, then ``logits = decoder(enc)`` reading the
first graph's outputs; replay both after copying new tokens into ``static_tokens``).

What it equals (``tests/runtime/test_batched_prefill_trim.py``): every row of ``tokens``
is one cold request of T tokens (no padding: the last position is the row's end).
``trim=True`` gives the last-position logits of ``V41Model`` with
``RuntimeOptions(swa="bounded", decoder_trim=True, cut=cut)`` (``logits="last"``):
layers from ``runtime.roles.first_trimmed_layer`` on run only on the last K = min(T, W)
rows of each sequence (W = ``replay_tokens`` or the config's window), their window reads
clamped at T - W; with cut "at" the cut layer (the last KV source) ran its compressor and
indexer-key path on every row first, in the encoder. ``trim=False`` runs the decoder on
all T rows: the engine's exact cold prefill. In ``row_invariant`` mode (the engine's row
tiles and attention layout, with host syncs: parity tests only) the logits equal the
engine's ``batch_invariant=True`` run; the fast form is what a GPU runs.

Both segments run under ``torch.no_grad`` and skip the indexer's training loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from runtime.batched.compressor import compress
from runtime.batched.layer import CsaState
from runtime.batched.model import BatchedV41
from runtime.errors import ConfigError
from runtime.grouped_moe import StackedExperts, grouped_moe, stack_all_layers
from runtime.mhc import HcMix, collapse, expand
from runtime.numerics import rms_norm
from runtime.options import CUT_POINTS
from runtime.roles import first_trimmed_layer
from runtime.weights import V41Weights


@dataclass
class Encoded:
    """What the encoder leaves for the decoder, every row of the batch (R = B*T).

    streams [R, hc, D] and ``pending`` = (the last encoder layer's FFN output [R, D],
    its mix), not yet expanded (the next mHC site does it, as in the engine); ``pre``
    [R, hc] that site's collapse weights; ``csa`` the KV sources' entries and index keys
    [B, N, .], the latest top-k [B, T, K] and candidate blocks [R, n]. ``shape`` = (B, T)
    as Python ints: static for a captured graph."""

    streams: torch.Tensor
    pending: tuple[torch.Tensor, HcMix] | None
    pre: torch.Tensor
    csa: CsaState
    shape: tuple[int, int]

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor the decoder may read (what a captured encoder graph must keep)."""
        out = [self.streams, self.pre, *self.csa.entries.values(), *self.csa.keys.values()]
        if self.pending is not None:
            mix = self.pending[1]
            out += [self.pending[0], mix.pre, mix.post, mix.comb]
        out += [t for t in (self.csa.topk, self.csa.candidates) if t is not None]
        return out


@dataclass(frozen=True)
class PrefillShape:
    """Rows the decoder runs on: the last ``keep`` of each sequence's T, from ``start``."""

    batch: int
    tokens: int
    keep: int

    @property
    def start(self) -> int:
        return self.tokens - self.keep


@dataclass
class BatchedPrefill:
    """``BatchedPrefill(weights, trim=..., cut=...)``: ``decoder(encoder(tokens))`` ->
    last-position logits float32 [B, vocab].

    ``grouped_moe``: the routed experts through ``runtime.grouped_moe`` (one grouped GEMM
    over the picked (row, expert) pairs, sync-free, on stacked copies of the expert
    weights made here) instead of every expert on every row, the batched forward's
    training form: that one is cheap with a handful of experts and backpropagates as
    plain GEMMs, but costs n_experts / top_k times the work on a long prefill (``mid``:
    32 experts, top-6). The stacks are a copy of the routed experts (``mid``: 9.7 GB in
    bf16): pass one prefill's ``stacked`` to the next to share them."""

    weights: V41Weights
    trim: bool = True
    cut: str = "after"
    replay_tokens: int | None = None
    row_invariant: bool = False
    grouped_moe: bool = False
    stacked: list[StackedExperts] | None = field(default=None, repr=False)
    model: BatchedV41 = field(init=False, repr=False)
    cut_layer: int = field(init=False)
    _moe: object = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        if self.cut not in CUT_POINTS:
            raise ConfigError(f"BatchedPrefill.cut: expected one of {CUT_POINTS}, got {self.cut!r}")
        if self.replay_tokens is not None and self.replay_tokens < 1:
            raise ConfigError(f"BatchedPrefill.replay_tokens: expected >= 1, got {self.replay_tokens}")
        if self.grouped_moe and self.row_invariant:
            raise ConfigError("BatchedPrefill: grouped_moe has no row-invariant form (the engine's tiled GEMMs); "
                              "use one or the other")
        self.model = BatchedV41(self.weights, row_invariant=self.row_invariant)
        c = self.model.config
        self._moe = None
        if self.grouped_moe:
            if self.stacked is None:
                self.stacked = stack_all_layers(self.weights)
            self._moe = self._grouped
        first = first_trimmed_layer(c, self.cut)
        self.cut_layer = c.num_hidden_layers if first is None else first
        late = [i for i in c.engram_layer_ids if i >= self.cut_layer]
        if late:  # the decoder has no Engram look-back (nor has the engine's trimmed prefill)
            raise ConfigError(f"BatchedPrefill: engram layer {late[0]} lies after the cut at layer {self.cut_layer}")

    @property
    def window(self) -> int:
        """W of the trim: rows kept per sequence, and where their window reads stop."""
        return self.replay_tokens if self.replay_tokens is not None else self.model.config.sliding_window

    def rows(self, batch: int, tokens: int) -> PrefillShape:
        return PrefillShape(batch, tokens, min(tokens, self.window) if self.trim else tokens)

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(tokens))

    @torch.no_grad()
    def encoder(self, tokens: torch.Tensor) -> Encoded:
        """tokens int64 [B, T] -> ``Encoded``: layers 0 .. cut-1 on all B*T rows (and, with
        cut "at", the cut layer's compressor and indexer keys)."""
        m, c = self.model, self.model.config
        b, t = tokens.shape
        streams, pre, hash_ids = m.embed(tokens)
        csa = CsaState()
        streams, pending, pre, _ = m.run_layers(range(self.cut_layer), streams, None, pre, (b, t), csa, hash_ids,
                                                indexer_loss=False, moe=self._moe)
        if self.cut_layer in c.kv_source_layer_ids:  # cut "at": the last KV source compresses every row
            lw = self.weights.layers[self.cut_layer]
            full = streams if pending is None else expand(pending[0], streams, pending[1])
            x = rms_norm(collapse(full, pre), lw.attn_norm.weight, c.rms_norm_eps).reshape(b, t, -1)
            csa.entries[self.cut_layer], csa.keys[self.cut_layer] = compress(
                x, c.compress_ratios[self.cut_layer], lw.attn, c, m.rope_compress, m.num, False)
        return Encoded(streams, pending, pre, csa, (b, t))

    @torch.no_grad()
    def decoder(self, enc: Encoded) -> torch.Tensor:
        """``Encoded`` -> logits float32 [B, vocab] of each sequence's last position: the
        layers from the cut on the kept rows. ``enc`` is not modified (a replayed graph
        reads it again)."""
        m, c, w = self.model, self.model.config, self.weights
        shape = self.rows(*enc.shape)
        streams, pending, pre = (keep_rows(x, shape) for x in (enc.streams, enc.pending, enc.pre))
        csa = enc.csa
        csa = replace(csa, entries=dict(csa.entries), keys=dict(csa.keys), losses=[],
                      topk=None if csa.topk is None else csa.topk[:, shape.start :],
                      candidates=keep_rows(csa.candidates, shape))
        streams, pending, pre, _ = m.run_layers(range(self.cut_layer, c.num_hidden_layers), streams, pending, pre,
                                                (shape.batch, shape.keep), csa, None, start=shape.start,
                                                indexer_loss=False, moe=self._moe)
        last = PrefillShape(shape.batch, shape.keep, 1)
        streams, pending, pre = (keep_rows(x, last) for x in (streams, pending, pre))
        if pending is not None:
            streams = expand(pending[0], streams, pending[1])
        hidden = rms_norm(collapse(streams, pre), w.norm.weight, c.rms_norm_eps)
        return m.num.linear(hidden, w.head.weight).float()

    def _grouped(self, layer: int, x: torch.Tensor, ffn) -> torch.Tensor:
        return grouped_moe(x, ffn, self.stacked[layer], self.model.config, self.model.num)


def keep_rows(x, shape: PrefillShape):
    """Rows [B*T, ...] (a tensor, a (tensor, HcMix) pending pair or None) -> the last
    ``shape.keep`` rows of each sequence, [B*keep, ...] (a view when B = 1)."""
    if x is None or shape.keep == shape.tokens:
        return x
    if isinstance(x, tuple):
        out, mix = x
        return keep_rows(out, shape), HcMix(*(keep_rows(y, shape) for y in (mix.pre, mix.post, mix.comb)))
    rest = x.shape[1:]
    return x.reshape(shape.batch, shape.tokens, *rest)[:, shape.start :].reshape(shape.batch * shape.keep, *rest)
