"""StaticDecodeModel: a ``V41Model`` whose decode steps run on the static slab.

The engine (``runtime.engine``) keeps calling ``forward(list[SeqChunk])``. Prefill chunks
go to the wrapped ``V41Model`` unchanged; decode chunks (``SeqChunk.decode``: one sampled
token after the prompt) go to ``runtime.static.step.StaticDecodeStep`` over a
``DecodeSlab``, eagerly or replayed from CUDA graphs (``runtime.static.graphs``). This is
the ``decode`` switch of ``RuntimeOptions``: "engine" (no wrapper), "static", "graphs".

A request moves into a slot at its first decode step (``DecodeSlab.load`` of its prefilled
state) and stays there. While it decodes the slot holds its caches and its
``SequenceState`` only advances ``num_computed``; the state is brought up to date from the
slot (``DecodeSlab.export``) if it is ever given a non-decode chunk again. A slot is freed
when its state is garbage-collected (the engine drops a finished request's state).

A step runs slots ``0..B-1`` with B the highest occupied slot + 1 (with graphs: the
bucket at or above it). Free slots inside that range step too, on token 0 from wherever
they are; rows never interact, so what they compute is discarded. A free slot near the
end of the slab is reset before it could overflow. The slab starts at
``INITIAL_MAX_LEN`` positions and doubles (slots moved, step rebuilt, graphs recaptured)
when a request needs more; a request that would pass ``max_position_embeddings`` decodes
on the engine path instead, counted in ``counters.static_fallback_tokens`` so a run can
see the optimization did not engage; so does a state the slab refuses to load (window KV the
decode would read was never computed), which keeps decoding on the engine path. With
``kv_storage = "packed"`` the slab holds the window and global KV as bytes
(runtime/kv_packing.py) wherever the fused attention runs.
"""

from __future__ import annotations

import math
import weakref

import torch

from runtime.errors import ConfigError, StateError
from runtime.state import SequenceState
from runtime.static.graphs import DEFAULT_BUCKETS, DecodeGraphs
from runtime.static.slab import DecodeSlab
from runtime.static.step import StaticDecodeStep

INITIAL_MAX_LEN = 256  # slab positions per slot at first (doubled on demand)


class StaticDecodeModel:
    """Wraps ``model`` (a V41Model); every attribute it does not define is the model's."""

    def __init__(self, model, *, max_batch: int = 64, max_len: int | None = None, graphs: bool = False):
        c = model.config
        if graphs and model.device.type != "cuda":
            raise ConfigError(f"decode = 'graphs' needs the model on a CUDA device, it is on {model.device}")
        self.model = model
        self.max_batch = max_batch
        self.use_graphs = graphs
        self._group = math.lcm(*[c.compress_ratios[s] for s in c.kv_source_layer_ids], 1)
        self.max_len_limit = (c.max_position_embeddings // self._group) * self._group
        self._slot_of: dict[int, int] = {}  # id(state) -> slot
        self._owner: list[weakref.ref | None] = [None] * max_batch
        self._refused: weakref.WeakSet = weakref.WeakSet()  # states the slab cannot hold
        self.slab = self.decoder = self.graphs = None
        # Packed only where the fused ring attention runs (its Triton kernel can fall back
        # to the reference, with the registry's warning); the step's kernels_used says which.
        packed = model.options.kv_storage == "packed" and model.ops.is_fused("attention")
        self.kv_storage = "packed" if packed else "dequantized"
        self._build(min(self.max_len_limit, max_len or INITIAL_MAX_LEN))

    def _build(self, max_len: int) -> None:
        """(Re)build the slab at ``max_len`` positions per slot, moving the occupied slots
        over, with its step (reusing the previous step's stacked experts and compiled
        helpers) and (graphs) its captured buckets. The step's cost grows with
        ``max_len`` (the indexer scores every key row), so the slab starts small and
        doubles when a request needs more room."""
        m = self.model
        max_len = -(-max_len // self._group) * self._group
        slab = DecodeSlab(m.config, self.max_batch, max_len, m.dtype, m.device, window=m.window,
                          kv_storage=self.kv_storage)
        if self.slab is not None:
            for slot, owner in enumerate(self._owner):
                if owner is not None:
                    slab.load(slot, self.slab.export(slot))
        self.slab = slab
        self.decoder = StaticDecodeStep(m.weights, m.options, slab, reuse=self.decoder)
        buckets = tuple(b for b in DEFAULT_BUCKETS if b < self.max_batch) + (self.max_batch,)
        self.graphs = DecodeGraphs(self.decoder.step, slab, buckets, device=m.device) if self.use_graphs else None

    def kernels_used(self) -> dict[str, str]:
        """``V41Model.kernels_used`` for this path: the decode steps call the fused
        ``experts`` op (prefill still runs the engine's MoE)."""
        return self.model.ops.describe_path(self.model.num.row_tile > 1, experts_on_path=True)

    def __getattr__(self, name):
        if name == "model":  # not set yet: no recursion through __getattr__
            raise AttributeError(name)
        return getattr(self.model, name)

    # ------------------------------------------------------------------ forward
    @torch.no_grad()
    def forward(self, chunks: list) -> list:
        outputs: list = [None] * len(chunks)
        static, engine = [], []
        for i, ch in enumerate(chunks):
            takes = getattr(ch, "decode", False) and self._fits(ch.state) and self._loads(ch.state)
            (static if takes else engine).append(i)
        for i in engine:
            self._write_back(chunks[i].state)
            if getattr(chunks[i], "decode", False):
                self.model.counters.static_fallback_tokens += 1
        if engine:
            for i, out in zip(engine, self.model.forward([chunks[i] for i in engine]), strict=True):
                outputs[i] = out
        if static:
            for i, out in zip(static, self._decode([chunks[i] for i in static]), strict=True):
                outputs[i] = out
        return outputs

    def _fits(self, state: SequenceState) -> bool:
        """Room for one more position (growing the slab if the config allows it)."""
        slot = self._slot_of.get(id(state))
        needed = (self.slab.lengths[slot] if slot is not None else state.num_computed) + 3
        if needed <= self.slab.max_len:
            return True
        if needed > self.max_len_limit:
            return False
        grown = self.slab.max_len
        while grown < needed:
            grown *= 2
        self._build(min(grown, self.max_len_limit))
        return True

    def _loads(self, state: SequenceState) -> bool:
        """The state is in a slot, or can be put in one. A state the slab refuses (window KV
        the decode would read was never computed: a decoder trim to fewer rows than the
        window) stays on the engine path, where its NaN marks the bad read."""
        if id(state) in self._slot_of:
            return True
        if state in self._refused:
            return False
        try:
            self._slot(state)
        except StateError:
            self._refused.add(state)
            return False
        return True

    def _decode(self, chunks: list) -> list:
        from runtime.model import ChunkOutput

        slots = [self._slot(ch.state) for ch in chunks]
        batch = max(slots) + 1
        run = self.graphs.bucket(batch) if self.graphs is not None else batch
        live = set(slots)
        for s in range(run):  # free slots in the range step too: keep them from overflowing
            if s not in live and self.slab.lengths[s] >= self.slab.max_len - 2:
                self.slab.reset(s)
        where = torch.tensor(slots, device=self.slab.device)
        tokens = torch.zeros(run, dtype=torch.int64, device=self.slab.device)
        tokens[where] = torch.cat([ch.tokens[-1:] for ch in chunks]).to(self.slab.device)
        if self.graphs is not None:
            self.slab.reserve(run)  # host bookkeeping the replayed graph does not run
            logits = self.graphs(tokens)
            self.model.counters.graph_replays += 1
        else:
            logits = self.decoder.step(tokens)
        rows = logits[where].float().cpu()
        self.model.counters.static_decode_tokens += len(chunks)
        for ch in chunks:
            ch.state.num_computed += 1
        return [ChunkOutput(rows[j : j + 1]) for j in range(len(chunks))]

    # ------------------------------------------------------------------ slots
    def _slot(self, state: SequenceState) -> int:
        slot = self._slot_of.get(id(state))
        if slot is not None:
            return slot
        slot = next((s for s, owner in enumerate(self._owner) if owner is None), None)
        if slot is None:
            raise ConfigError(f"static decode: more than {self.slab.max_batch} requests decode at once "
                              "(the slab's max_batch); raise it or lower the engine's max_batch_requests")
        self.slab.load(slot, state)
        self._slot_of[id(state)] = slot
        self._owner[slot] = weakref.ref(state, lambda _ref, key=id(state), s=slot: self._free(key, s))
        return slot

    def _free(self, key: int, slot: int) -> None:
        if self._slot_of.get(key) == slot:
            del self._slot_of[key]
            self._owner[slot] = None

    def _write_back(self, state: SequenceState) -> None:
        """A state leaving the slab: its caches come back from the slot."""
        slot = self._slot_of.pop(id(state), None)
        if slot is None:
            return
        self._owner[slot] = None
        vars(state).update(vars(self.slab.export(slot)))
