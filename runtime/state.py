"""Per-request state (everything a sequence carries between forward steps) and the
immutable prefix snapshots the engine's prefix cache stores.

State of one request:
- ``tokens``: every token id fed so far, by position (Engram look-back, replay checks);
- ``swa[l]``: layer l's window KV (FP8-rounded values) by position; positions never
  computed (trimmed rows, or below a restored prefix's window) hold NaN, so a read that
  the window rules should have excluded poisons the output instead of passing silently;
- per KV source: ``global_kv`` (NVFP4 entries), ``index_keys`` (MXFP4) and, for ratio 2,
  the partial group's (kv, gate) rows in ``comp_buffer``;
- ``window_floor``: the lowest position window attention may read (H-W after a bounded
  replay hit), ``write_floor``: positions below it do not write global KV / index keys
  (the replayed range).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runtime.config import V41Config
from runtime.errors import StateError


@dataclass(frozen=True)
class PrefixSnapshot:
    """The cacheable part of a state after its first ``n_tokens`` tokens.

    ``swa`` (every layer's window KV of positions [n-W+1, n)) is what exact mode needs
    to continue exactly; bounded replay never reads it.
    """

    config: V41Config
    window: int
    n_tokens: int
    tokens: torch.Tensor  # int64 [n]
    global_kv: dict[int, torch.Tensor]  # src -> [n // ratio, head_dim]
    index_keys: dict[int, torch.Tensor]  # src -> [n // ratio, index_head_dim]
    comp_buffer: dict[int, tuple[torch.Tensor, torch.Tensor]]  # src -> (kv, gate) [n % ratio, hd]
    swa: dict[int, torch.Tensor] | None  # layer -> [min(n, W-1), head_dim]

    @property
    def swa_complete(self) -> bool:
        """Every layer's window KV before ``n_tokens`` was computed (a decoder-trimmed
        prefill leaves holes in the layers after the cut)."""
        return self.swa is not None and not any(bool(torch.isnan(kv).any()) for kv in self.swa.values())


class SequenceState:
    """Mutable caches of one request; advanced by ``V41Model.forward``."""

    def __init__(self, config: V41Config, window: int, dtype: torch.dtype, device: torch.device | str):
        self.config = config
        self.window = window
        self.dtype = dtype
        self.device = torch.device(device)
        self.num_computed = 0
        self.tokens = torch.zeros(0, dtype=torch.int64, device=self.device)
        self.swa: list[torch.Tensor] = [
            torch.empty(0, config.head_dim, dtype=dtype, device=self.device)
            for _ in range(config.num_hidden_layers)
        ]
        self.global_kv: dict[int, torch.Tensor] = {}
        self.index_keys: dict[int, torch.Tensor] = {}
        self.comp_buffer: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        for src in config.kv_source_layer_ids:
            self.global_kv[src] = torch.empty(0, config.head_dim, dtype=dtype, device=self.device)
            self.index_keys[src] = torch.empty(0, config.index_head_dim, dtype=dtype, device=self.device)
            if config.compress_ratios[src] > 1:
                empty = torch.empty(0, config.head_dim, dtype=torch.float32, device=self.device)
                self.comp_buffer[src] = (empty, empty)
        self.window_floor = 0
        self.write_floor = 0
        self.hit_tokens = 0  # tokens taken from a prefix snapshot (0: cold)
        # What the model did to this request (the engagement ledger reads these):
        self.replayed_tokens = 0  # cached tokens fed again by bounded replay
        self.trimmed_chunks = 0  # prefill chunks whose decoder rows were trimmed
        self.trimmed_rows = 0  # prefill rows the trimmed layers did not run on

    # ------------------------------------------------------------------ storage
    def ensure_capacity(self, n_positions: int) -> None:
        cap = self.tokens.shape[0]
        if n_positions <= cap:
            return
        new_cap = max(n_positions, 2 * cap, 256)
        tokens = torch.zeros(new_cap, dtype=torch.int64, device=self.device)
        tokens[:cap] = self.tokens
        self.tokens = tokens
        for layer, buf in enumerate(self.swa):
            grown = torch.full((new_cap, buf.shape[1]), float("nan"), dtype=buf.dtype, device=self.device)
            grown[: buf.shape[0]] = buf
            self.swa[layer] = grown

    # ------------------------------------------------------------------ prefix caching
    def export_prefix(self, n_tokens: int) -> PrefixSnapshot:
        """Snapshot of the first ``n_tokens`` tokens (<= num_computed). ``n_tokens`` must
        complete every compressor group unless it is the current length, because a
        consumed partial group is not kept."""
        if not 0 < n_tokens <= self.num_computed:
            raise StateError(f"export_prefix: n_tokens {n_tokens} outside (0, {self.num_computed}]")
        c = self.config
        global_kv, index_keys, comp_buffer = {}, {}, {}
        for src in c.kv_source_layer_ids:
            ratio = c.compress_ratios[src]
            if n_tokens % ratio and n_tokens != self.num_computed:
                raise StateError(
                    f"export_prefix: n_tokens {n_tokens} splits a ratio-{ratio} group of layer {src}; "
                    "export at a multiple of the ratio or at the current length"
                )
            n_entries = n_tokens // ratio
            global_kv[src] = self.global_kv[src][:n_entries].clone()
            index_keys[src] = self.index_keys[src][:n_entries].clone()
            if src in self.comp_buffer:
                kv, gate = self.comp_buffer[src]
                keep = n_tokens % ratio
                comp_buffer[src] = (kv[:keep].clone(), gate[:keep].clone())
        lo = max(0, n_tokens - (self.window - 1))
        swa = {layer: buf[lo:n_tokens].clone() for layer, buf in enumerate(self.swa)}
        return PrefixSnapshot(
            config=c, window=self.window, n_tokens=n_tokens, tokens=self.tokens[:n_tokens].clone(),
            global_kv=global_kv, index_keys=index_keys, comp_buffer=comp_buffer, swa=swa,
        )

    def restore(self, snap: PrefixSnapshot, *, replay_tokens: int = 0) -> None:
        """Continue after ``snap``: exactly (SWA restored; ``replay_tokens == 0``) or by
        bounded replay of its last ``replay_tokens`` tokens."""
        if snap.config != self.config or snap.window != self.window:
            raise StateError("prefix snapshot comes from a model with a different config or window")
        n = snap.n_tokens
        self.ensure_capacity(n)
        self.tokens[:n] = snap.tokens
        self.global_kv = dict(snap.global_kv)
        self.index_keys = dict(snap.index_keys)
        self.comp_buffer = dict(snap.comp_buffer)
        self.hit_tokens = n
        if replay_tokens:
            self.replayed_tokens = replay_tokens
            self.num_computed = n - replay_tokens
            self.window_floor = n - replay_tokens
            self.write_floor = n
            return
        if snap.swa is None:
            raise StateError("prefix snapshot has no window KV; exact mode cannot continue from it")
        lo = max(0, n - (self.window - 1))
        for layer, kv in snap.swa.items():
            self.swa[layer][lo:n] = kv
        self.num_computed = n

    def tokens_to_feed_after_hit(self, prompt_tokens: torch.Tensor | list[int]) -> torch.Tensor:
        """The part of ``prompt_tokens`` the next forward must feed: everything from
        ``num_computed`` on (after a bounded-replay hit this starts with the W replayed
        tokens). Checks that the prompt agrees with the cached prefix."""
        prompt = torch.as_tensor(prompt_tokens, dtype=torch.int64)
        n = self.hit_tokens
        if prompt.shape[0] <= self.num_computed:
            raise StateError(
                f"prompt of {prompt.shape[0]} tokens leaves nothing to compute after {self.num_computed}"
            )
        if n and not torch.equal(prompt[:n].to(self.device), self.tokens[:n]):
            raise StateError("prompt does not start with the cached prefix tokens")
        return prompt[self.num_computed :]
