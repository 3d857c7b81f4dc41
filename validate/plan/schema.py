"""A validated plan, as frozen dataclasses (parsing lives in ``load.py``).

A plan says what to run: one engine, several variants of it, several tasks, a
baseline, seeds, concurrency, warm mode and the gate policy. Its *hash* covers only
what changes responses (engine identity, variants, tasks with their items and
generation overrides, seed, warm mode, perturbations): renaming the plan, changing the
concurrency or the gate margins keeps the hash, so a rerun resumes from the store and
a re-gate never recomputes a response. A builtin variant enters the hash as its
normalised options (``RuntimeOptions.to_dict``), so ``{swa = "bounded"}`` and the same
with ``encoder_replay``/``decoder_trim`` spelled out are one plan; ``legacy_hash`` is
the hash v41val 0.1 gave (options as written), by which the runner finds and re-keys
a store that version wrote.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from validate.gate.policy import GatePolicy
from validate.plan.speed import SpeedSpec

ENGINE_KINDS = ("builtin", "openai", "vllm")
AA_SUFFIX = "+aa"
# How patiently the client waits and retries: never what a response says, so not part of
# the plan hash (a rerun with a longer timeout resumes instead of starting over).
OPERATIONAL_KEYS = frozenset({"timeout_s", "connect_timeout_s", "max_attempts", "backoff_base_s",
                              "backoff_max_s", "startup_timeout_s"})


def _sha256(doc: dict) -> str:
    canon = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def normalised_config(config: Mapping[str, Any], engine_kind: str) -> dict:
    """A stored variant config in today's form: a builtin variant's options normalised
    (a store written by v41val 0.1 kept them as written); left as stored when they do
    not parse (options of a ``RuntimeOptions`` subclass this process does not know)."""
    out = dict(config)
    if engine_kind != "builtin":
        return out
    from runtime.errors import ConfigError
    from runtime.options import RuntimeOptions

    with contextlib.suppress(ConfigError, TypeError):
        out["options"] = RuntimeOptions(**dict(out.get("options") or {})).to_dict()
    return out


def engine_identity(engine: Mapping[str, Any]) -> dict:
    """An engine table (``EngineSpec.to_dict``) without its operational settings."""
    return {k: v for k, v in engine.items() if k not in OPERATIONAL_KEYS}


@dataclass(frozen=True)
class EngineSpec:
    """The plan's ``[engine]`` table. ``settings`` holds the kind's own keys, checked
    by the loader (builtin: preset | checkpoint, device, dtype, seed; openai: base_url,
    model and client settings; vllm: model, common_args, python, launcher, ...)."""

    kind: str
    settings: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"kind": self.kind, **dict(self.settings)}

    def identity(self) -> dict:
        """``to_dict`` without the operational settings (see OPERATIONAL_KEYS)."""
        return engine_identity(self.to_dict())


@dataclass(frozen=True)
class VariantSpec:
    """One variant. builtin: ``options``, a ``runtime.options.RuntimeOptions`` (a mapping
    of its fields is read into one), and ``written``, the options as the plan spelled
    them; vllm: ``args`` (server flags) and ``env``; openai: ``endpoint`` (base_url/model
    overrides). ``perturb`` is reserved for planted degradations (builtin engine)."""

    name: str
    options: Any = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    endpoint: Mapping[str, str] = field(default_factory=dict)
    perturb: Mapping[str, Any] = field(default_factory=dict)
    written: Mapping[str, Any] | None = None
    aa_of: str | None = None  # the A/A copy of this baseline (``Plan.aa``)

    def __post_init__(self) -> None:
        if isinstance(self.options, Mapping):
            from runtime.options import RuntimeOptions

            if self.written is None:
                object.__setattr__(self, "written", dict(self.options))
            object.__setattr__(self, "options", RuntimeOptions(**dict(self.options)))
        elif self.written is None and self.options is not None:
            object.__setattr__(self, "written", self.options.to_dict())

    def config(self) -> dict:
        """What identifies this variant's responses (stored with the run): builtin
        options normalised (``RuntimeOptions.to_dict``), so equivalent wordings of one
        configuration are one config and one plan hash."""
        return self._config(None if self.options is None else self.options.to_dict())

    def legacy_config(self) -> dict:
        """``config`` as v41val 0.1 stored it (the options as written), to find the runs
        of a store written before the options were normalised."""
        return self._config(dict(self.written or {}) or None)

    def _config(self, options: dict | None) -> dict:
        out: dict[str, Any] = {}
        if options:
            out["options"] = options
        if self.args:
            out["args"] = list(self.args)
        if self.env:
            out["env"] = dict(self.env)
        if self.endpoint:
            out["endpoint"] = dict(self.endpoint)
        if self.perturb:
            out["perturb"] = dict(self.perturb)
        if self.aa_of is not None:
            out["aa_of"] = self.aa_of
        return out

    def runtime_options(self):
        """The variant's ``RuntimeOptions`` (builtin engine)."""
        if self.options is None:
            from runtime.options import RuntimeOptions

            return RuntimeOptions()
        return self.options


@dataclass(frozen=True)
class TaskSpec:
    """One task of the plan: ``limit`` first items or an explicit ``items`` list,
    ``repeats`` per item, and generation overrides."""

    name: str
    limit: int | None = None
    items: tuple[str, ...] | None = None
    repeats: int = 1
    max_gen_toks: int | None = None
    temperature: float | None = None
    top_p: float | None = None

    def to_dict(self) -> dict:
        d = {"name": self.name, "repeats": self.repeats}
        for key in ("limit", "max_gen_toks", "temperature", "top_p"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        if self.items is not None:
            d["items"] = list(self.items)
        return d


@dataclass(frozen=True)
class Plan:
    """A validated plan. ``policy_doc`` is the policy as a TOML document (inline, or
    read from the file the plan named) so a stored run can be re-gated without it."""

    name: str
    source: str
    engine: EngineSpec
    variants: tuple[VariantSpec, ...]
    tasks: tuple[TaskSpec, ...]
    baseline: str
    seed: int = 0
    concurrency: int = 4
    warm: bool = False
    policy: GatePolicy | None = None
    policy_doc: Mapping[str, Any] | None = None
    description: str = ""
    fidelity_prompts: int = 16  # per task; 0 turns the fidelity pass off (builtin only)
    fidelity_tokens: int = 32  # baseline greedy tokens teacher-forced per prompt
    speed: SpeedSpec | None = None  # the headline concurrency sweep; None: no sweep
    aa: bool = False  # the baseline runs twice (the A/A noise floor); see aa_variant

    @property
    def aa_variant(self) -> str | None:
        """The A/A copy of the baseline (``aa = true``): the same configuration run once
        more at the same concurrency with the requests in another order (other batch
        compositions), so every A/B pair has the baseline's own flip rate beside it."""
        return f"{self.baseline}{AA_SUFFIX}" if self.aa else None

    def variant(self, name: str) -> VariantSpec:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(name)

    @property
    def variant_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.variants)

    def identity(self, legacy: bool = False) -> dict:
        """Everything that changes a response, canonical (the hash's input);
        ``legacy``: with the variants' configs as v41val 0.1 hashed them."""
        return {
            "engine": self.engine.identity(),
            "variants": {v.name: v.legacy_config() if legacy else v.config()
                         for v in self.variants},
            "tasks": [t.to_dict() for t in self.tasks],
            "seed": self.seed,
            "warm": self.warm,
        }

    @property
    def hash(self) -> str:
        return _sha256(self.identity())

    @property
    def legacy_hash(self) -> str:
        """The hash v41val 0.1 gave this plan (raw options): a store it wrote keys its
        responses by it, and ``validate.runner.run`` re-keys them to ``hash``."""
        return _sha256(self.identity(legacy=True))

    def to_dict(self) -> dict:
        """The whole plan (stored with every run; ``analyze_run`` reads it back)."""
        return {
            "name": self.name, "source": self.source, "description": self.description,
            **self.identity(), "engine": self.engine.to_dict(), "baseline": self.baseline, "concurrency": self.concurrency,
            "policy": None if self.policy_doc is None else dict(self.policy_doc),
            "policy_source": None if self.policy is None else self.policy.source,
            "fidelity": {"prompts": self.fidelity_prompts, "tokens": self.fidelity_tokens},
            "speed": None if self.speed is None else self.speed.to_dict(),
            "plan_hash": self.hash,
        }
