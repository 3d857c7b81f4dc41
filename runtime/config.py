"""V41Config: the model's shape, in the released ``text_config`` field names.

A frozen dataclass (lists become tuples). ``V41Config.preset("tiny" | "mid" | "flash")``
gives the three scales of the toolkit; ``from_hf_config(path)`` reads a V4.1
``config.json`` (nested ``text_config``); ``to_hf_dict()`` writes one back. Every
inconsistency is a one-line :class:`ConfigError` naming the field, because a wrong
schedule (e.g. a KV source with ratio 0) would otherwise surface as a shape error deep
inside a forward pass.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from runtime.errors import ConfigError

QUANT_BLOCK = 32  # FP8/MXFP4 scale block; NVFP4 uses 16, which divides it
SUPPORTED_RATIOS = (0, 1, 2)
SCORING_FUNCS = ("sqrtsoftplus", "sigmoid", "softmax")
DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class YarnScaling:
    """YaRN parameters of the compressed-branch RoPE (mscale is not applied)."""

    factor: float = 16.0
    original_max_position_embeddings: int = 65536
    beta_fast: float = 32.0
    beta_slow: float = 1.0

    def to_hf_dict(self) -> dict[str, Any]:
        return {"rope_type": "yarn", **dataclasses.asdict(self)}


@dataclass(frozen=True)
class V41Config:
    # --- attention / rope ---
    vocab_size: int = 129280
    hidden_size: int = 5120
    num_hidden_layers: int = 40
    num_attention_heads: int = 64
    num_key_value_heads: int = 1
    head_dim: int = 512
    q_lora_rank: int = 1280
    qk_rope_head_dim: int = 64
    rope_theta: float = 10000.0
    compress_rope_theta: float = 160000.0
    rope_scaling: YarnScaling | None = field(default_factory=YarnScaling)
    max_position_embeddings: int = 1048576
    # --- sliding window + CSA2 ---
    sliding_window: int = 128
    compress_ratios: tuple[int, ...] = (0, 0) + (2,) * 18 + (1,) * 20
    kv_source_layer_ids: tuple[int, ...] = (2, 8, 14, 20)
    index_source_layer_ids: tuple[int, ...] = (2, 8, 14, 20, 24, 28, 32, 36)
    candidate_source_layer_id: int = 20
    candidate_topk_blocks: int = 2048
    candidate_block_size: int = 8
    index_n_heads: int = 32
    index_head_dim: int = 128
    index_topk: int = 512
    # --- grouped output projection ---
    o_groups: int = 8
    o_lora_rank: int = 1024
    # --- MoE ---
    moe_intermediate_size: int = 2304
    n_routed_experts: int = 384
    n_shared_experts: int = 1
    num_experts_per_tok: int = 6
    scoring_func: str = "sqrtsoftplus"
    gate_temp: float = 1.0
    norm_topk_prob: bool = True
    routed_scaling_factor: float = 1.5
    topk_method: str = "noaux_tc"
    swiglu_limit: float = 10.0
    # --- mHC ---
    hc_mult: int = 4
    hc_sinkhorn_iters: int = 20
    hc_eps: float = 1e-6
    # --- Engram ---
    engram_layer_ids: tuple[int, ...] = (1, 14)
    engram_vocab_size: int = 16000000
    engram_num_embeddings: tuple[int, ...] = (384006168, 384016682)
    engram_max_ngram_size: int = 4
    engram_n_heads: int = 8
    engram_head_dim: int = 256
    engram_pad_id: int = 2
    engram_compressed_vocab_size: int = 99092
    # --- misc ---
    rms_norm_eps: float = 1e-20
    tie_word_embeddings: bool = False
    eos_token_id: int = 1
    torch_dtype: str = "bfloat16"
    num_nextn_predict_layers: int = 0

    # ------------------------------------------------------------------ validation
    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, list):
                object.__setattr__(self, f.name, tuple(value))
        if isinstance(self.rope_scaling, dict):
            object.__setattr__(self, "rope_scaling", _yarn_from_dict(self.rope_scaling))
        self._validate()

    def _validate(self) -> None:  # noqa: C901 - one check per line reads best
        n = self.num_hidden_layers
        _positive(self, "num_hidden_layers", "vocab_size", "hidden_size", "num_attention_heads",
                  "head_dim", "q_lora_rank", "sliding_window", "index_n_heads", "index_head_dim",
                  "index_topk", "o_groups", "o_lora_rank", "moe_intermediate_size",
                  "n_routed_experts", "num_experts_per_tok", "hc_mult", "hc_sinkhorn_iters",
                  "candidate_block_size", "candidate_topk_blocks")
        for name in ("hidden_size", "head_dim", "q_lora_rank", "index_head_dim", "o_lora_rank",
                     "moe_intermediate_size", "engram_head_dim"):
            if getattr(self, name) % QUANT_BLOCK:
                raise ConfigError(
                    f"{name}: {getattr(self, name)} is not a multiple of {QUANT_BLOCK} "
                    "(the FP8/FP4 fake-quant blocks must tile it)"
                )
        if self.qk_rope_head_dim % 2 or not 0 < self.qk_rope_head_dim <= min(
            self.head_dim, self.index_head_dim
        ):
            raise ConfigError(
                f"qk_rope_head_dim: {self.qk_rope_head_dim} must be even and in "
                f"(0, min(head_dim, index_head_dim)]"
            )
        if self.num_key_value_heads != 1:
            raise ConfigError(f"num_key_value_heads: V4.1 shares one KV latent, got {self.num_key_value_heads}")
        if self.num_attention_heads % self.o_groups:
            raise ConfigError(
                f"o_groups: {self.o_groups} does not divide num_attention_heads {self.num_attention_heads}"
            )
        if self.num_experts_per_tok > self.n_routed_experts:
            raise ConfigError(
                f"num_experts_per_tok: {self.num_experts_per_tok} > n_routed_experts {self.n_routed_experts}"
            )
        if self.scoring_func not in SCORING_FUNCS:
            raise ConfigError(f"scoring_func: expected one of {SCORING_FUNCS}, got {self.scoring_func!r}")
        if self.torch_dtype not in DTYPES:
            raise ConfigError(f"torch_dtype: expected one of {DTYPES}, got {self.torch_dtype!r}")
        if len(self.compress_ratios) != n:
            raise ConfigError(
                f"compress_ratios: {len(self.compress_ratios)} entries, expected num_hidden_layers={n}"
            )
        bad = [r for r in self.compress_ratios if r not in SUPPORTED_RATIOS]
        if bad:
            raise ConfigError(f"compress_ratios: V4.1 allows only {SUPPORTED_RATIOS}, got {bad[0]}")
        self._validate_sources()
        self._validate_engram()

    def _validate_sources(self) -> None:
        n = self.num_hidden_layers
        ratios = self.compress_ratios
        for name in ("kv_source_layer_ids", "index_source_layer_ids", "engram_layer_ids"):
            ids = getattr(self, name)
            if any(not 0 <= i < n for i in ids):
                raise ConfigError(f"{name}: {list(ids)} has a layer outside [0, {n})")
            if list(ids) != sorted(set(ids)):
                raise ConfigError(f"{name}: {list(ids)} must be strictly increasing")
        for i in self.kv_source_layer_ids:
            if ratios[i] not in (1, 2):
                raise ConfigError(
                    f"kv_source_layer_ids: layer {i} has compress_ratios[{i}]={ratios[i]}, a KV source needs ratio 1 or 2"
                )
        for i in range(n):
            if ratios[i] == 0:
                continue
            src = self.kv_source_of(i)
            if src is None:
                raise ConfigError(f"compress_ratios: layer {i} has ratio {ratios[i]} but no KV source at or before it")
            if ratios[src] != ratios[i]:
                raise ConfigError(
                    f"compress_ratios: layer {i} has ratio {ratios[i]} but its KV source {src} has ratio {ratios[src]}"
                )
        for i in self.index_source_layer_ids:
            if ratios[i] == 0:
                raise ConfigError(f"index_source_layer_ids: layer {i} has ratio 0 (no compressed branch)")
        for i in range(n):
            if ratios[i] > 0 and self.index_source_of(i) is None:
                raise ConfigError(f"index_source_layer_ids: compressed layer {i} has no index source at or before it")
        for i in self.kv_source_layer_ids:
            if i not in self.index_source_layer_ids:
                raise ConfigError(f"index_source_layer_ids: KV source {i} must also be an index source")
        c = self.candidate_source_layer_id
        if c >= 0 and c not in self.index_source_layer_ids:
            raise ConfigError(f"candidate_source_layer_id: {c} is not in index_source_layer_ids")
        for i in self.index_source_layer_ids:
            if 0 <= c < i and self.kv_source_of(i) != self.kv_source_of(c):
                raise ConfigError(
                    f"index_source_layer_ids: layer {i} uses candidates of layer {c} but reads the keys of "
                    f"KV source {self.kv_source_of(i)}, not {self.kv_source_of(c)}"
                )

    def _validate_engram(self) -> None:
        if len(self.engram_num_embeddings) != len(self.engram_layer_ids):
            raise ConfigError(
                f"engram_num_embeddings: {len(self.engram_num_embeddings)} entries, expected one per "
                f"engram_layer_ids ({len(self.engram_layer_ids)})"
            )
        if not self.engram_layer_ids:
            return
        if self.engram_max_ngram_size < 2 or self.engram_n_heads < 1:
            raise ConfigError("engram_max_ngram_size/engram_n_heads: need n-grams >= 2 and >= 1 head")
        if not 0 <= self.engram_pad_id < self.engram_compressed_vocab_size:
            raise ConfigError(
                f"engram_pad_id: {self.engram_pad_id} outside the compressed vocab "
                f"[0, {self.engram_compressed_vocab_size})"
            )

    # ------------------------------------------------------------------ layer roles
    def kv_source_of(self, layer: int) -> int | None:
        """The KV source whose compressed KV layer ``layer`` reads (None for ratio 0)."""
        if self.compress_ratios[layer] == 0:
            return None
        before = [s for s in self.kv_source_layer_ids if s <= layer]
        return before[-1] if before else None

    def index_source_of(self, layer: int) -> int | None:
        """The index source whose published top-k layer ``layer`` uses."""
        if self.compress_ratios[layer] == 0:
            return None
        before = [s for s in self.index_source_layer_ids if s <= layer]
        return before[-1] if before else None

    @property
    def last_kv_source(self) -> int:
        return max(self.kv_source_layer_ids) if self.kv_source_layer_ids else -1

    @property
    def dtype(self):
        import torch

        return getattr(torch, self.torch_dtype)

    # ------------------------------------------------------------------ construction
    @classmethod
    def preset(cls, name: str) -> V41Config:
        from runtime.presets import PRESETS

        presets = PRESETS
        if name not in presets:
            raise ConfigError(f"preset: expected one of {sorted(presets)}, got {name!r}")
        return presets[name]()

    def replace(self, **changes) -> V41Config:
        """A copy with ``changes`` applied and validated again (engram sizes recomputed
        when the engram layout changes and no explicit sizes are given)."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:  # a plan's engine.overrides, say: one line naming the field
            raise ConfigError(f"V41Config: unknown field {unknown[0]!r} (fields: "
                              f"{', '.join(sorted(known))})")
        engram_keys = {"engram_layer_ids", "engram_vocab_size", "engram_max_ngram_size", "engram_n_heads"}
        if engram_keys & changes.keys() and "engram_num_embeddings" not in changes:
            probe = dataclasses.replace(
                self, **{**changes, "engram_num_embeddings": (0,) * len(changes.get(
                    "engram_layer_ids", self.engram_layer_ids))}
            )
            changes["engram_num_embeddings"] = engram_table_sizes(probe)
        return dataclasses.replace(self, **changes)

    def to_hf_dict(self) -> dict[str, Any]:
        text: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, YarnScaling):
                value = value.to_hf_dict()
            text[f.name] = value
        text["model_type"] = "deepseek_v41_text"
        return {
            "architectures": ["DeepseekV41ForCausalLM"],
            "model_type": "deepseek_v41",
            "text_config": text,
        }

    @classmethod
    def from_hf_dict(cls, data: dict[str, Any], source: str = "config") -> V41Config:
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: expected a JSON object")
        text = data.get("text_config", data)
        if not isinstance(text, dict):
            raise ConfigError(f"{source}: text_config must be an object")
        known = {f.name: f for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in text.items():
            if key not in known:
                continue  # vision/DSpark/training fields the runtime does not model
            kwargs[key] = _coerce(key, known[key], value, source)
        if "num_hidden_layers" in kwargs and "compress_ratios" in kwargs:
            # The release ships num_nextn_predict_layers trailing zero ratios.
            n = kwargs["num_hidden_layers"]
            kwargs["compress_ratios"] = tuple(kwargs["compress_ratios"])[:n]
        try:
            return cls(**kwargs)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None


def from_hf_config(path: str | Path) -> V41Config:
    """Read a V4.1 ``config.json`` (a file, or a directory holding one)."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{p}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    return V41Config.from_hf_dict(data, source=str(p))


# ---------------------------------------------------------------------- helpers
def _positive(cfg: V41Config, *names: str) -> None:
    for name in names:
        value = getattr(cfg, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{name}: expected a positive integer, got {value!r}")


def _yarn_from_dict(d: dict[str, Any]) -> YarnScaling | None:
    kind = d.get("rope_type", d.get("type", "yarn"))
    if kind in ("default", None):
        return None
    if kind != "yarn":
        raise ConfigError(f"rope_scaling.rope_type: only 'yarn' is supported, got {kind!r}")
    try:
        return YarnScaling(
            factor=float(d.get("factor", 16.0)),
            original_max_position_embeddings=int(d.get("original_max_position_embeddings", 65536)),
            beta_fast=float(d.get("beta_fast", 32.0)),
            beta_slow=float(d.get("beta_slow", 1.0)),
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"rope_scaling: bad value ({exc})") from None


def _coerce(key: str, f: dataclasses.Field, value: Any, source: str) -> Any:
    """Check a JSON value against the field's annotated type (strings in annotations)."""
    kind = str(f.type)
    if key == "rope_scaling":
        if value is None or isinstance(value, dict):
            return value
        raise ConfigError(f"{source}: rope_scaling: expected an object or null")
    if kind.startswith("tuple"):
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise ConfigError(f"{source}: {key}: expected a list of integers, got {value!r}")
        return tuple(value)
    if kind == "int":
        if key == "candidate_source_layer_id" and value is None:
            return -1
        if key == "eos_token_id" and isinstance(value, list) and value:
            value = value[0]
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"{source}: {key}: expected an integer, got {value!r}")
        return value
    if kind == "float":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ConfigError(f"{source}: {key}: expected a number, got {value!r}")
        return float(value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{source}: {key}: expected true/false, got {value!r}")
        return value
    if kind == "str":
        if not isinstance(value, str):
            raise ConfigError(f"{source}: {key}: expected a string, got {value!r}")
        return value
    return value


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    k = 3
    while k * k <= n:
        if n % k == 0:
            return False
        k += 2
    return True


def engram_primes(config: V41Config) -> tuple[tuple[tuple[int, ...], ...], ...]:
    """Bucket sizes [engram layer][n-gram size - 2][head]: for every n-gram size the
    heads take the next unused primes above ``engram_vocab_size - 1``; a prime is never
    handed out twice (across layers too), which keeps all bucket ranges distinct."""
    seen: set[int] = set()
    layers = []
    for _ in config.engram_layer_ids:
        per_ngram = []
        for _ in range(config.engram_max_ngram_size - 1):
            current = config.engram_vocab_size - 1
            sizes = []
            for _ in range(config.engram_n_heads):
                current += 1
                while current in seen or not _is_prime(current):
                    current += 1
                seen.add(current)
                sizes.append(current)
            per_ngram.append(tuple(sizes))
        layers.append(tuple(per_ngram))
    return tuple(layers)


def engram_table_sizes(config: V41Config) -> tuple[int, ...]:
    """Rows of each engram layer's table: the sum of its bucket sizes."""
    return tuple(sum(sum(sizes) for sizes in layer) for layer in engram_primes(config))
