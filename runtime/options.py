"""How a model runs, as data: the SWA mode switch and friends.

Passed down from the engine to every module call; two models with different options
share one set of weights in one process. There are no module-level mode flags.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from runtime.errors import ConfigError

SWA_MODES = ("exact", "bounded")
CUT_POINTS = ("after", "at")
KERNEL_CHOICES = ("reference",)


@dataclass(frozen=True)
class RuntimeOptions:
    """Runtime switches.

    swa: "exact" recomputes sliding-window KV exactly (the result equals a cold full
        prefill, also after a prefix hit and across chunk boundaries); "bounded" turns
        on vLLM's bounded replay (both sides unless set separately below).
    encoder_replay: after a prefix hit of H > W tokens, re-feed only [H-W, H) with window
        reads clamped at H-W; cached global/indexer KV is never rewritten. Hits <= W are
        ignored (cold prefill). None means "swa == 'bounded'".
    decoder_trim: layers after the cut run only on each request's last min(len, W)
        prefill rows (cold prefills included; logits="all" chunks keep all rows).
        None means "swa == 'bounded'".
    cut: "after" the last KV source (vLLM: layers > last source are trimmed) or "at" it
        (paper: the last source layer itself is trimmed too, except its compressor and
        indexer-key path, which still runs on every row).
    kernels: which ops run fused (runtime.kernels): "reference"/"none", "fused"/"all", or
        "+op"/"-op" entries (a list or a comma-separated string), e.g. ("+gate", "-mhc").
    batch_invariant: every row's numbers are independent of what else is in the call
        (fixed-tile GEMMs, per-query reductions in a fixed order). Exactness tests use it.
    replay_tokens: W used for replay and trimming; None means the config's sliding_window.
    """

    swa: str = "exact"
    encoder_replay: bool | None = None
    decoder_trim: bool | None = None
    cut: str = "after"
    kernels: str | tuple[str, ...] = "reference"
    batch_invariant: bool = False
    replay_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.swa not in SWA_MODES:
            raise ConfigError(f"RuntimeOptions.swa: expected one of {SWA_MODES}, got {self.swa!r}")
        if self.cut not in CUT_POINTS:
            raise ConfigError(f"RuntimeOptions.cut: expected one of {CUT_POINTS}, got {self.cut!r}")
        if self.kernels not in KERNEL_CHOICES:
            from runtime.kernels.choice import normalise_choice  # light: no Triton import

            object.__setattr__(self, "kernels", normalise_choice(self.kernels))
        for name in ("encoder_replay", "decoder_trim", "batch_invariant"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, bool):
                raise ConfigError(f"RuntimeOptions.{name}: expected a bool, got {value!r}")
        if self.replay_tokens is not None and (
            not isinstance(self.replay_tokens, int) or self.replay_tokens < 1
        ):
            raise ConfigError(
                f"RuntimeOptions.replay_tokens: expected a positive int, got {self.replay_tokens!r}"
            )
        bounded = self.swa == "bounded"
        if self.encoder_replay is None:
            object.__setattr__(self, "encoder_replay", bounded)
        if self.decoder_trim is None:
            object.__setattr__(self, "decoder_trim", bounded)

    def window(self, sliding_window: int) -> int:
        """The W of replay and trimming for a model whose window is ``sliding_window``."""
        return self.replay_tokens if self.replay_tokens is not None else sliding_window

    def with_(self, **changes) -> RuntimeOptions:
        return replace(self, **changes)
