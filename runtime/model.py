"""V41Model: the V4.1 forward pass over packed request chunks, with the SWA mode switch.

``V41Model(weights, options)`` reads ``weights`` (shared, never copied). One call to
``forward([SeqChunk, ...])`` runs one step for several requests (prefill chunks and
decode tokens mixed); each chunk continues its ``SequenceState`` at ``num_computed``.

Decoder trim (options.decoder_trim): for a prefill chunk whose logits are "last",
layers after the cut run only on its last min(T, W) rows, window reads clamped at
chunk_end - W. cut="after": the first trimmed layer is last KV source + 1 (vLLM);
cut="at": the last KV source itself is trimmed after its compressor and indexer-key
path ran on every row (paper).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch

from runtime.config import V41Config
from runtime.counters import ModelCounters
from runtime.engram import EngramHasher
from runtime.errors import ConfigError, StateError
from runtime.layer import StepContext, run_layer, select_rows
from runtime.mhc import collapse, expand, first_pre
from runtime.numerics import Numerics, rms_norm
from runtime.options import RuntimeOptions
from runtime.roles import first_trimmed_layer
from runtime.rope import RopePair
from runtime.rows import RowSet, Segment, trimmed
from runtime.state import PrefixSnapshot, SequenceState
from runtime.weights import V41Weights


@dataclass
class SeqChunk:
    state: SequenceState
    tokens: torch.Tensor  # int64 [T]
    logits: str = "last"  # "last" | "all"
    decode: bool = False  # one sampled token after the prompt (runtime.static may take it)


@dataclass
class ChunkOutput:
    logits: torch.Tensor  # float32 [T, vocab] ("all") or [1, vocab] ("last")


class V41Model:
    def __init__(self, weights: V41Weights, options: RuntimeOptions | None = None):
        self.weights = weights
        self.options = options or RuntimeOptions()
        self.config: V41Config = weights.config
        c = self.config
        self.window = c.sliding_window  # attention window
        self.replay = self.options.window(c.sliding_window)  # replay / trim length
        self.rope = RopePair(c)
        self.hasher = EngramHasher(c, weights.engram_token_map) if c.engram_layer_ids else None
        self.cut_layer = self._cut_layer() if self.options.decoder_trim else None
        self.counters = ModelCounters()
        from runtime.kernels.registry import KernelRegistry  # Triton loads only for fused ops

        self.ops = KernelRegistry(self.options.kernels, device=self.device, dtype=self.dtype)
        self.num = Numerics.for_options(self.options.batch_invariant, gemm=self.ops.fused_or_none("linear"))

    def kernels_used(self) -> dict[str, str]:
        """op -> what runs on this model's path (the engagement ledger's ``kernels``): the
        registry's choice, except fused ops this path does not call. The engine's MoE
        loops over the experts (``runtime/moe.py``), so the fused ``experts`` op runs only
        in the static decode steps (``decode = static | graphs``); batch-invariant numerics
        run their own tiled GEMMs, so neither ``linear`` nor ``experts`` runs fused there."""
        return self.ops.describe_path(self.num.row_tile > 1, experts_on_path=False)

    def _cut_layer(self) -> int | None:
        """First layer that runs on trimmed rows (None: nothing to trim)."""
        c = self.config
        first = first_trimmed_layer(c, self.options.cut)
        if first is None:
            return None
        late_engram = [i for i in c.engram_layer_ids if i >= first]
        if late_engram:
            raise ConfigError(f"decoder_trim: engram layer {late_engram[0]} lies after the cut at layer {first}")
        return first

    @property
    def device(self) -> torch.device:
        return self.weights.embed.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.weights.embed.weight.dtype

    # ------------------------------------------------------------------ states
    def new_state(self, prefix: PrefixSnapshot | None = None) -> SequenceState:
        """A fresh request state, or one that continues after a cached prefix.

        The hit is ignored (a cold state, ``hit_tokens == 0``) when encoder replay is on
        and H <= W, and when exact continuation is asked for but the snapshot's window
        KV has holes (it came from a decoder-trimmed prefill that stopped past H)."""
        state = SequenceState(self.config, self.window, self.dtype, self.device)
        if prefix is None:
            return state
        replay = bool(self.options.encoder_replay)
        if replay and prefix.n_tokens <= self.replay:
            return state
        if not replay and not prefix.swa_complete:
            return state
        state.restore(prefix, replay_tokens=self.replay if replay else 0)
        self.counters.prefix_hits += 1
        self.counters.hit_tokens += state.hit_tokens
        self.counters.replayed_tokens += state.replayed_tokens
        return state

    # ------------------------------------------------------------------ forward
    @torch.no_grad()
    def forward(self, chunks: list[SeqChunk]) -> list[ChunkOutput]:
        if not chunks:
            return []
        c, num = self.config, self.num
        segments, tokens, row0 = [], [], 0
        for chunk in chunks:
            seg = self._prepare(chunk, row0)
            segments.append(seg)
            tokens.append(chunk.tokens.to(self.device))
            row0 += seg.n
        if len({id(ch.state) for ch in chunks}) != len(chunks):
            raise StateError("forward: the same state appears twice in one step")
        rows = RowSet(segments, num.padded_rows(row0))
        token_rows = torch.zeros(rows.total, dtype=torch.int64, device=self.device)
        token_rows[:row0] = torch.cat(tokens)
        ctx = StepContext(c, num, self.rope, self.window, self._hash_ids(rows), self.ops)

        streams = self.weights.embed.weight[token_rows]  # [R, D]
        streams = streams.unsqueeze(1).expand(-1, c.hc_mult, -1).contiguous()  # [R, hc, D]
        pre = first_pre(rows.total, c.hc_mult, self.device)
        pending = None  # the last FFN's output, expanded by the next mHC site
        for layer in range(c.num_hidden_layers):
            trim_at = None
            if layer == self.cut_layer and any(s.trim for s in rows.segments):
                self._count_trim(rows)
                trim = partial(trimmed, window=self.replay, padded_rows=num.padded_rows)
                if self.options.cut == "after":
                    rows, index = trim(rows)
                    streams, pre = streams[index], pre[index]
                    if pending is not None:
                        pending = (pending[0][index], select_rows(pending[1], index))
                else:
                    trim_at = trim  # run_layer trims after the KV-source update
            streams, pending, pre, rows = run_layer(
                layer, streams, pending, pre, rows, self.weights.layers[layer], ctx, trim_at
            )
        if pending is not None:
            streams = expand(pending[0], streams, pending[1])
        hidden = rms_norm(collapse(streams, pre), self.weights.norm.weight, c.rms_norm_eps)
        outputs = []
        for chunk, seg in zip(chunks, rows.segments, strict=True):
            wanted = hidden[seg.rows] if chunk.logits == "all" else hidden[seg.rows][-1:]
            logits = num.linear(wanted, self.weights.head.weight).float()
            outputs.append(ChunkOutput(logits))
            seg.state.num_computed = seg.chunk_end
        return outputs

    def _count_trim(self, rows: RowSet) -> None:
        """Record, per request and in total, the chunks whose trimmed layers drop rows
        (a chunk of at most W rows is marked for trimming but loses none)."""
        for seg in rows.segments:
            dropped = seg.n - self.replay if seg.trim else 0
            if dropped > 0:
                seg.state.trimmed_chunks += 1
                seg.state.trimmed_rows += dropped
                self.counters.trimmed_chunks += 1
                self.counters.trimmed_rows += dropped

    def _prepare(self, chunk: SeqChunk, row0: int) -> Segment:
        st, c = chunk.state, self.config
        if st.config != c or st.window != self.window:
            raise StateError("forward: state was made by a model with a different config or window")
        if chunk.logits not in ("last", "all"):
            raise StateError(f"SeqChunk.logits: expected 'last' or 'all', got {chunk.logits!r}")
        toks = chunk.tokens
        if toks.dim() != 1 or toks.shape[0] == 0:
            raise StateError("SeqChunk.tokens: expected a non-empty 1-D tensor of token ids")
        if int(toks.min()) < 0 or int(toks.max()) >= c.vocab_size:
            raise StateError(f"SeqChunk.tokens: ids must lie in [0, {c.vocab_size})")
        start = st.num_computed
        end = start + toks.shape[0]
        if end > c.max_position_embeddings:
            raise StateError(f"sequence of {end} tokens exceeds max_position_embeddings {c.max_position_embeddings}")
        st.ensure_capacity(end)
        if start < st.hit_tokens:  # replayed range: must match the cached tokens
            overlap = min(end, st.hit_tokens)
            if not torch.equal(toks[: overlap - start].to(self.device), st.tokens[start:overlap]):
                raise StateError("replayed tokens differ from the cached prefix")
        st.tokens[start:end] = toks.to(self.device)
        trim = bool(self.options.decoder_trim) and chunk.logits == "last" and toks.shape[0] > 1
        positions = torch.arange(start, end, device=self.device)
        return Segment(state=st, positions=positions, row0=row0, floor=st.window_floor, trim=trim, chunk_end=end)

    def _hash_ids(self, rows: RowSet) -> torch.Tensor | None:
        if self.hasher is None:
            return None
        cols = (self.config.engram_max_ngram_size - 1) * self.config.engram_n_heads
        out = torch.zeros(rows.total, len(self.config.engram_layer_ids), cols, dtype=torch.int64,
                          device=self.device)
        for seg in rows.segments:
            out[seg.rows] = self.hasher(seg.state.tokens, seg.positions)
        return out
