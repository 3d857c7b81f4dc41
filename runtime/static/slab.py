"""DecodeSlab: preallocated decode caches for ``max_batch`` slots x ``max_len`` positions.

Why a slab: the engine's ``SequenceState`` grows its caches by concatenation and keeps
per-request Python metadata, so a decode step over many requests is a Python loop with
host syncs and fresh allocations. Here every cache is one tensor with a slot axis, its
shape fixed when the slab is built, and the per-slot metadata (``num_computed``,
``window_floor``) lives on the device, so ``runtime.static.step.StaticDecodeStep`` can
write in place and be captured in a CUDA graph.

Layout (dtype and device of the weights unless said otherwise):
- ``swa[layer]`` [B, W, head_dim]: the window KV as a ring, position p in slot p % W.
  A ring, not a by-position buffer: a decode query reads exactly the W most recent
  positions, so the ring is the whole read (no gather of a window out of a
  [B, max_len] buffer) and its size does not grow with ``max_len``. Slots that hold no
  valid position (before the sequence start, below the window floor) hold finite values
  (zeros, or a position the window has left); the step masks them by position, so
  NaN holes of a state (positions never computed) are stored as 0 and ``export``
  writes them back as NaN.
- per KV source ``src``: ``global_kv[src]`` [B, max_len // ratio, head_dim] (NVFP4
  entries), ``index_keys[src]`` [B, max_len // ratio, index_head_dim] (MXFP4 keys);
  for ratio 2 the partial group's rows ``comp_kv[src]``, ``comp_gate[src]``
  [B, ratio, head_dim] float32, position p in row p % ratio.
- per slot: ``tokens`` [B, max_len] int64 (Engram look-back), ``num_computed`` [B]
  int64 and ``window_floor`` [B] int64, on the device.

``kv_storage = "packed"`` (``RuntimeOptions.kv_storage``): ``swa[layer]`` and
``global_kv[src]`` are ``PackedKV`` byte caches instead (runtime/kv_packing.py: e4m3
codes [B, W, hd] + ue8m0 scales [B, W, hd/32]; e2m1 nibble pairs [B, N, hd/2] + e4m3
scales [B, N, hd/16]), holding exactly the same values; only the fused ring attention
reads them. ``load`` encodes a state's fake-quantised values (``kv_packing.encode``),
``export`` decodes them back into the model dtype.

``load`` and ``export`` move a request between a ``SequenceState`` (runtime/state.py)
and a slot; they may sync (they run between captured steps, never inside one).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runtime.config import V41Config
from runtime.errors import ConfigError, StateError
from runtime.kv_packing import PackedKV, encode
from runtime.options import KV_STORAGE
from runtime.state import SequenceState


@dataclass
class SlotBook:
    """Host-side facts of a loaded slot that no step changes (for ``export``)."""

    write_floor: int = 0
    hit_tokens: int = 0
    replayed_tokens: int = 0
    trimmed_chunks: int = 0
    trimmed_rows: int = 0


class DecodeSlab:
    """Preallocated caches of ``max_batch`` decode slots (see the module docstring)."""

    def __init__(self, config: V41Config, max_batch: int, max_len: int, dtype: torch.dtype,
                 device: torch.device | str, window: int | None = None, kv_storage: str = "dequantized"):
        if kv_storage not in KV_STORAGE:
            raise ConfigError(f"DecodeSlab.kv_storage: expected one of {KV_STORAGE}, got {kv_storage!r}")
        if max_batch < 1:
            raise ConfigError(f"DecodeSlab.max_batch: expected a positive integer, got {max_batch}")
        ratios = {config.compress_ratios[s] for s in config.kv_source_layer_ids}
        if max_len < 1 or max_len > config.max_position_embeddings or any(max_len % r for r in ratios):
            raise ConfigError(
                f"DecodeSlab.max_len: expected a positive multiple of every KV source's ratio "
                f"{sorted(ratios)} up to max_position_embeddings {config.max_position_embeddings}, "
                f"got {max_len}")
        self.config = config
        self.max_batch = max_batch
        self.max_len = max_len
        self.window = window if window is not None else config.sliding_window
        self.dtype = dtype
        self.kv_storage = kv_storage
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:  # "cuda" is the current device
            self.device = torch.device("cuda", torch.cuda.current_device())
        b, w, hd = max_batch, self.window, config.head_dim
        zeros = dict(dtype=dtype, device=self.device)
        packed = kv_storage == "packed"
        self.swa = [PackedKV.zeros("fp8", (b, w), hd, self.device) if packed else torch.zeros(b, w, hd, **zeros)
                    for _ in range(config.num_hidden_layers)]
        self.global_kv: dict[int, torch.Tensor | PackedKV] = {}
        self.index_keys: dict[int, torch.Tensor] = {}
        self.comp_kv: dict[int, torch.Tensor] = {}
        self.comp_gate: dict[int, torch.Tensor] = {}
        for src in config.kv_source_layer_ids:
            ratio = config.compress_ratios[src]
            n = max_len // ratio
            self.global_kv[src] = PackedKV.zeros("nvfp4", (b, n), hd, self.device) if packed else torch.zeros(
                b, n, hd, **zeros)
            self.index_keys[src] = torch.zeros(b, n, config.index_head_dim, **zeros)
            if ratio > 1:
                self.comp_kv[src] = torch.zeros(b, ratio, hd, dtype=torch.float32, device=self.device)
                self.comp_gate[src] = torch.zeros(b, ratio, hd, dtype=torch.float32, device=self.device)
        self.tokens = torch.zeros(b, max_len, dtype=torch.int64, device=self.device)
        self.num_computed = torch.zeros(b, dtype=torch.int64, device=self.device)
        self.window_floor = torch.zeros(b, dtype=torch.int64, device=self.device)
        self.books = [SlotBook() for _ in range(b)]
        self.lengths = [0] * b  # host mirror of num_computed (no sync to check room)

    # ------------------------------------------------------------------ host bookkeeping
    def reserve(self, batch: int) -> None:
        """Account one more position in slots 0..batch-1 (host side, no sync); a slot
        that would pass ``max_len`` is a StateError before anything is written."""
        if not 1 <= batch <= self.max_batch:
            raise StateError(f"decode step: batch {batch} outside [1, {self.max_batch}] (the slab's max_batch)")
        full = [s for s in range(batch) if self.lengths[s] >= self.max_len]
        if full:
            raise StateError(f"decode step: slot {full[0]} is full ({self.max_len} positions, the slab's max_len)")
        for s in range(batch):
            self.lengths[s] += 1

    def _slot(self, slot: int) -> int:
        if not 0 <= slot < self.max_batch:
            raise StateError(f"DecodeSlab slot {slot} outside [0, {self.max_batch})")
        return slot

    # ------------------------------------------------------------------ load / export
    @torch.no_grad()
    def load(self, slot: int, state: SequenceState) -> None:
        """Copy ``state`` (prefilled by V41Model; a cold, exact or bounded-replay state)
        into ``slot``; the slot's previous contents are overwritten."""
        c, slot = self.config, self._slot(slot)
        if state.config != c or state.window != self.window:
            raise StateError("DecodeSlab.load: the state comes from a model with a different config or window")
        n = state.num_computed
        if n < state.write_floor or n < state.hit_tokens:
            raise StateError(f"DecodeSlab.load: the state stops at {n}, inside its replayed prefix "
                             f"(write floor {state.write_floor}); prefill it first")
        if n >= self.max_len:
            raise StateError(f"DecodeSlab.load: the state holds {n} positions, the slab {self.max_len}")
        floor = state.window_floor
        self.tokens[slot].zero_()
        self.tokens[slot, :n] = state.tokens[:n].to(self.device)
        lo = max(0, n - (self.window - 1))
        ring = torch.arange(lo, n, device=self.device) % self.window
        for layer, buf in enumerate(state.swa):
            rows = buf[lo:n].to(self.device, self.dtype)
            holes = torch.isnan(rows).any(dim=-1)
            readable = torch.arange(lo, n, device=self.device) >= floor
            if bool((holes & readable).any()):
                raise StateError(f"DecodeSlab.load: layer {layer}'s window KV has a hole above the window "
                                 f"floor {floor} (a decoder-trimmed state stopped mid-prefill?)")
            self._store(self.swa[layer], slot, ring, torch.nan_to_num(rows, nan=0.0), f"swa[{layer}]")
        for src in c.kv_source_layer_ids:
            ratio = c.compress_ratios[src]
            entries = n // ratio
            for name, have, cache in (("global_kv", state.global_kv[src], self.global_kv[src]),
                                      ("index_keys", state.index_keys[src], self.index_keys[src])):
                if have.shape[0] != entries:
                    raise StateError(f"DecodeSlab.load: {name}[{src}] holds {have.shape[0]} entries, "
                                     f"expected {entries} for {n} positions at ratio {ratio}")
                self._store(cache, slot, slice(0, entries), have.to(self.device, self.dtype), f"{name}[{src}]")
            if ratio > 1:
                kv, gate = state.comp_buffer[src]
                if kv.shape[0] != n % ratio:
                    raise StateError(f"DecodeSlab.load: comp_buffer[{src}] holds {kv.shape[0]} rows, "
                                     f"expected {n % ratio}")
                self.comp_kv[src][slot].zero_()
                self.comp_gate[src][slot].zero_()
                self.comp_kv[src][slot, : kv.shape[0]] = kv.to(self.device, torch.float32)
                self.comp_gate[src][slot, : gate.shape[0]] = gate.to(self.device, torch.float32)
        self.num_computed[slot] = n
        self.window_floor[slot] = floor
        self.lengths[slot] = n
        self.books[slot] = SlotBook(state.write_floor, state.hit_tokens, state.replayed_tokens,
                                    state.trimmed_chunks, state.trimmed_rows)

    def reset(self, slot: int) -> None:
        """An empty slot (position 0, nothing cached): what a dummy padding slot can be."""
        self.load(slot, SequenceState(self.config, self.window, self.dtype, self.device))

    @torch.no_grad()
    def export(self, slot: int) -> SequenceState:
        """The slot as a ``SequenceState`` the engine can continue (or a test compare).
        Window KV is known for the last W-1 positions only (the ring); older positions
        and those below the window floor read NaN, as never-computed positions do."""
        c, slot = self.config, self._slot(slot)
        n = int(self.num_computed[slot])
        floor = int(self.window_floor[slot])
        st = SequenceState(c, self.window, self.dtype, self.device)
        st.ensure_capacity(max(n, 1))
        st.tokens[:n] = self.tokens[slot, :n]
        lo = max(0, n - (self.window - 1), floor)
        ring = torch.arange(lo, n, device=self.device) % self.window
        for layer in range(c.num_hidden_layers):
            st.swa[layer][lo:n] = self._fetch(self.swa[layer], slot, ring)
        for src in c.kv_source_layer_ids:
            ratio = c.compress_ratios[src]
            st.global_kv[src] = self._fetch(self.global_kv[src], slot, slice(0, n // ratio)).clone()
            st.index_keys[src] = self.index_keys[src][slot, : n // ratio].clone()
            if ratio > 1:
                keep = n % ratio
                st.comp_buffer[src] = (self.comp_kv[src][slot, :keep].clone(),
                                       self.comp_gate[src][slot, :keep].clone())
        st.num_computed = n
        st.window_floor = floor
        book = self.books[slot]
        st.write_floor, st.hit_tokens, st.replayed_tokens = book.write_floor, book.hit_tokens, book.replayed_tokens
        st.trimmed_chunks, st.trimmed_rows = book.trimmed_chunks, book.trimmed_rows
        return st

    # ------------------------------------------------------------------ dequantized or packed
    def _store(self, cache: torch.Tensor | PackedKV, slot: int, at, values: torch.Tensor, name: str) -> None:
        """Slot ``slot`` of ``cache`` cleared, then ``values`` written at rows ``at``
        (packed caches: encoded exactly, a StateError if they are not on the format's grid)."""
        if not isinstance(cache, PackedKV):
            cache[slot].zero_()
            cache[slot, at] = values
            return
        try:
            packed = encode(values, cache.fmt)
        except ValueError as exc:
            raise StateError(f"DecodeSlab.load: {name}: {exc}") from None
        for part, new in zip(cache[:2], packed[:2], strict=True):
            part[slot].zero_()
            part[slot, at] = new

    def _fetch(self, cache: torch.Tensor | PackedKV, slot: int, at) -> torch.Tensor:
        """Rows ``at`` of slot ``slot`` in the model dtype."""
        if not isinstance(cache, PackedKV):
            return cache[slot, at]
        return PackedKV(cache.codes[slot, at], cache.scales[slot, at], cache.fmt).unpack(self.dtype)
