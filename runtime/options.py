"""How a model runs, as data: the SWA mode switch and friends.

Passed down from the engine to every module call; two models with different options
share one set of weights in one process. There are no module-level mode flags.

Every field carries its own description (a ``Switch`` in the field's metadata): type,
choices, help, command-line flag and how ``--ablate`` varies it. That description is
the single source of truth: plan parsing (``validate.plan.load``), the builtin engine's
``describe()``, ``v41val serve``'s flags, the lm-eval model's arguments, ``--ablate``
and the stored variant config all read it through ``switches()``, ``from_text`` and
``to_dict``, so a new switch is one field here (``tests/validate/test_switch_metadata.py``
adds one in a test and follows it through all of them). A subclass of
``RuntimeOptions`` that adds fields works the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from runtime.errors import ConfigError

SWA_MODES = ("exact", "bounded")
CUT_POINTS = ("after", "at")
DECODE_PATHS = ("engine", "static", "graphs")
KV_STORAGE = ("dequantized", "packed")
TRUE_WORDS = ("true", "1", "yes", "on")
FALSE_WORDS = ("false", "0", "no", "off")


@dataclass(frozen=True)
class Ablation:
    """How ``--ablate`` varies one switch (``validate.plan.ablate``).

    off: the switch's value in the all-reference baseline variant.
    on: its value in the ``all_on`` variant.
    alone: the variants that turn on this switch only, as ``(name, value)`` pairs;
        a callable (given the ops to ablate, or None for all) or None for one variant
        named after the switch with the value ``on``. ``()`` adds none.
    implies: other switches every one of this switch's own variants also sets (decoder
        trim needs ``swa = "bounded"``).
    """

    off: Any
    on: Any
    alone: Callable[[tuple[str, ...] | None], tuple[tuple[str, Any], ...]] | tuple | None = None
    implies: Mapping[str, Any] = field(default_factory=dict)

    def variants(self, name: str, ops: tuple[str, ...] | None = None
                 ) -> tuple[tuple[str, Any], ...]:
        if self.alone is None:
            return ((name, self.on),)
        if callable(self.alone):
            return tuple(self.alone(ops))
        return tuple(self.alone)


@dataclass(frozen=True)
class Switch:
    """The description of one ``RuntimeOptions`` field.

    kind: ``bool``, ``str`` or ``int`` (what a plan's TOML value must be).
    optional: None is a valid value (it means "derived", see the field's help).
    choices: the allowed values of a ``str`` switch (empty: any, ``normalise`` judges).
    minimum: the smallest value of an ``int`` switch.
    flag: the command-line flag (default ``--<name with dashes>``; booleans also get
        ``--no-<name>``).
    ablation: how ``--ablate`` varies it; None keeps the baseline's value in every
        ablated variant.
    normalise: a callable turning an accepted value into its canonical form (raises
        ``ConfigError`` on a bad one).
    text: a callable reading the value from text where the default reading does not
        fit (lm-eval's comma-split model args: ``kernels=+gate|-mhc``).
    canonical: a callable giving the one spelling of equivalent values, for the stored
        config (``kernels``: "none" and "reference" are one choice); None: the value.
    """

    kind: type
    help: str
    optional: bool = False
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    flag: str | None = None
    ablation: Ablation | None = None
    normalise: Callable[[Any], Any] | None = None
    text: Callable[[str], Any] | None = None
    canonical: Callable[[Any], Any] | None = None

    def cli_flag(self, name: str) -> str:
        return self.flag or "--" + name.replace("_", "-")

    def check(self, owner: str, name: str, value: Any) -> Any:
        """``value`` validated and normalised; ``ConfigError`` names ``owner.name``."""
        where = f"{owner}.{name}"
        if value is None:
            if self.optional:
                return None
            raise ConfigError(f"{where}: expected {self._expected()}, got None")
        if self.normalise is not None:
            return self.normalise(value)
        if self.kind is bool:
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: expected a bool, got {value!r}")
        elif self.kind is int:
            if isinstance(value, bool) or not isinstance(value, int) or (
                    self.minimum is not None and value < self.minimum):
                raise ConfigError(f"{where}: expected {self._expected()}, got {value!r}")
        elif self.choices and value not in self.choices:
            raise ConfigError(f"{where}: expected one of {self.choices}, got {value!r}")
        elif not isinstance(value, self.kind):
            raise ConfigError(f"{where}: expected {self._expected()}, got {value!r}")
        return value

    def from_text(self, owner: str, name: str, text: Any) -> Any:
        """The value of a textual setting (a CLI flag, an lm-eval model arg)."""
        if not isinstance(text, str):
            return self.check(owner, name, text)
        if self.optional and text.lower() in ("", "none", "null"):
            return None
        if self.text is not None:
            return self.check(owner, name, self.text(text))
        if self.kind is bool:
            low = text.lower()
            if low in TRUE_WORDS or low in FALSE_WORDS:
                return low in TRUE_WORDS
            raise ConfigError(f"{owner}.{name} expects true/false, got {text!r}")
        if self.kind is int:
            try:
                return self.check(owner, name, int(text))
            except ValueError:
                raise ConfigError(f"{owner}.{name}: expected {self._expected()}, got {text!r}"
                                  ) from None
        return self.check(owner, name, text)

    def _expected(self) -> str:
        if self.kind is int:
            return "a positive int" if self.minimum == 1 else "an int"
        if self.choices:
            return f"one of {self.choices}"
        return {bool: "a bool", str: "a string"}.get(self.kind, self.kind.__name__)


def switch(default: Any, **description: Any) -> Any:
    """A ``RuntimeOptions`` field with its ``Switch`` description."""
    return field(default=default, metadata={"switch": Switch(**description)})


def _normalise_kernels(value: Any) -> Any:
    from runtime.kernels.choice import normalise_choice  # light: no Triton

    return normalise_choice(value)


def _canonical_kernels(value: Any) -> str:
    """"reference" (nothing fused), "all" (everything) or "+op,+op" in table order."""
    from runtime.kernels.choice import fused_by_op

    wanted = fused_by_op(value)
    if not any(wanted.values()):
        return "reference"
    if all(wanted.values()):
        return "all"
    return ",".join(f"+{op}" for op, on in wanted.items() if on)


def _fused_alone(ops: tuple[str, ...] | None) -> tuple[tuple[str, str], ...]:
    from runtime.kernels.ops import OP_NAMES

    return tuple((f"fused_{op}", f"+{op}") for op in (OP_NAMES if ops is None else ops))


@dataclass(frozen=True)
class RuntimeOptions:
    """Runtime switches (each field's ``help`` says what it does)."""

    swa: str = switch(
        "exact", kind=str, choices=SWA_MODES,
        help="exact | bounded: exact recomputes sliding-window KV exactly (the result "
             "equals a cold full prefill, also after a prefix hit and across chunk "
             "boundaries); bounded turns on vLLM's bounded replay (both sides unless set "
             "separately).",
        ablation=Ablation(off="exact", on="bounded", alone=()))
    encoder_replay: bool | None = switch(
        None, kind=bool, optional=True,
        help="After a prefix hit of H > W tokens, re-feed only [H-W, H) with window reads "
             "clamped at H-W; cached global/indexer KV is never rewritten; hits <= W are "
             "ignored (default: on with swa = bounded).",
        ablation=Ablation(off=False, on=True, implies={"swa": "bounded"}))
    decoder_trim: bool | None = switch(
        None, kind=bool, optional=True,
        help="Layers after the cut run only on each request's last min(len, W) prefill rows "
             "(cold prefills included; logits='all' chunks keep all rows) (default: on "
             "with swa = bounded).",
        ablation=Ablation(off=False, on=True, implies={"swa": "bounded"}))
    cut: str = switch(
        "after", kind=str, choices=CUT_POINTS,
        help="after | at: where the decoder trim starts: after the last KV source (vLLM) "
             "or at it (paper: the last source layer is trimmed too, except its compressor "
             "and indexer-key path).")
    kernels: str | tuple[str, ...] = switch(
        "reference", kind=str, normalise=_normalise_kernels, canonical=_canonical_kernels,
        text=lambda s: s.replace("|", ","),
        help="Which ops run fused (runtime.kernels): reference | none, fused | all, or "
             "'+op'/'-op' entries (a list or a comma-separated string), e.g. +gate,-mhc.",
        ablation=Ablation(off="reference", on="all", alone=_fused_alone))
    batch_invariant: bool = switch(
        False, kind=bool,
        help="Every row's numbers are independent of what else is in the call (fixed-tile "
             "GEMMs, per-query reductions in a fixed order).")
    decode: str = switch(
        "engine", kind=str, choices=DECODE_PATHS,
        help="engine | static | graphs: how decode steps run: the engine's per-request step; "
             "one fixed-shape step for all decoding requests over preallocated caches "
             "(runtime/static, no host sync); that step replayed from CUDA graphs, one per "
             "batch-size bucket (CUDA only). Same math; a different order of float "
             "operations, so logits may differ in the last bits.")
    decode_compile: bool = switch(
        False, kind=bool,
        help="With decode = static or graphs: the decode step's small ops (RMSNorm, RoPE, the "
             "attention core, the grouped MoE) compiled by torch.compile (inductor), about half "
             "the kernels per step; float order differs (bf16 noise), graphs still equal the "
             "eager step with the same setting bit for bit.")
    kv_storage: str = switch(
        "dequantized", kind=str, choices=KV_STORAGE,
        help="dequantized | packed: how the static decode slab holds the window and global KV: "
             "their fake-quantised values in the model dtype, or the formats' own bytes (FP8 "
             "e4m3 + ue8m0 per 32, NVFP4 e2m1 pairs + e4m3 per 16; runtime/kv_packing.py) "
             "decoded inside the fused ring attention. Same values (bit-for-bit logits in float32; "
             "bf16 tensor-core sums may run in another order); slower than dequantized on the "
             "H200 so far (docs/architecture.md). packed needs decode = static or graphs, fused "
             "attention and fast numerics.")
    replay_tokens: int | None = switch(
        None, kind=int, optional=True, minimum=1,
        help="W used for replay and trimming (default: the config's sliding_window).")

    def __post_init__(self) -> None:
        owner = "RuntimeOptions"
        for name, sw in switches(type(self)).items():
            object.__setattr__(self, name, sw.check(owner, name, getattr(self, name)))
        self._derive()

    def _derive(self) -> None:
        """Fill the switches whose None means "follow swa"."""
        bounded = self.swa == "bounded"
        if self.encoder_replay is None:
            object.__setattr__(self, "encoder_replay", bounded)
        if self.decoder_trim is None:
            object.__setattr__(self, "decoder_trim", bounded)
        if self.decode_compile and self.decode == "engine":
            raise ConfigError("RuntimeOptions.decode_compile: needs decode = 'static' or 'graphs' "
                              "(the engine's decode step is not compiled)")
        if self.kv_storage == "packed":
            from runtime.kernels.choice import fused_by_op  # light: no Triton

            if self.decode == "engine" or self.batch_invariant or not fused_by_op(self.kernels)["attention"]:
                raise ConfigError("RuntimeOptions.kv_storage: 'packed' needs decode = 'static' or 'graphs', "
                                  "attention fused (kernels = 'all' or '+attention') and batch_invariant off "
                                  "(only the fused ring attention reads packed caches)")

    @classmethod
    def from_text(cls, settings: Mapping[str, Any]) -> RuntimeOptions:
        """Options from textual settings (command-line values, lm-eval model args);
        unknown names are a ``ConfigError``."""
        known = switches(cls)
        unknown = sorted(set(settings) - set(known))
        if unknown:
            raise ConfigError(f"{cls.__name__}: unknown option(s) {unknown} "
                              f"(known: {', '.join(known)})")
        return cls(**{k: known[k].from_text(cls.__name__, k, v) for k, v in settings.items()})

    def to_dict(self) -> dict[str, Any]:
        """The normalised options, every field (what a variant's stored config holds):
        two wordings of one configuration give one dict."""
        out = {}
        for name, sw in switches(type(self)).items():
            value = getattr(self, name)
            out[name] = value if sw.canonical is None else sw.canonical(value)
        return out

    def window(self, sliding_window: int) -> int:
        """The W of replay and trimming for a model whose window is ``sliding_window``."""
        return self.replay_tokens if self.replay_tokens is not None else sliding_window

    def with_(self, **changes) -> RuntimeOptions:
        return replace(self, **changes)


def switches(options_type: type = RuntimeOptions) -> dict[str, Switch]:
    """field name -> its ``Switch``, in declaration order (subclasses' fields last)."""
    return {f.name: f.metadata["switch"] for f in fields(options_type) if "switch" in f.metadata}


def switch_defaults(options_type: type = RuntimeOptions) -> dict[str, Any]:
    """field name -> its declared default (before derivation)."""
    return {f.name: f.default for f in fields(options_type) if "switch" in f.metadata}
