"""Where the builtin engine's weights come from, and a pool that loads each source once.

A ``ModelSource`` names either a preset with a seed (random weights, deterministic) or a
checkpoint directory. Variants of one run (exact vs bounded, reference vs fused) differ
only in ``RuntimeOptions``; they must read the same ``V41Weights`` object
(docs/design.md, principle 2), so engines get their weights from a ``WeightsPool`` that loads a source
once and hands the same object to every variant. The pool is an explicit object (one
per run), not a module-level cache.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from runtime.devices import check_device
from runtime.errors import CheckpointError
from runtime.seeds import check_seed
from validate.engines.errors import EngineError

TESTBED = "testbed"  # the trained checkpoint of runtime/testbed, not random weights

# A 4-layer cut of ``tiny`` keeping every structural piece (ratio-0/2/1 layers, two KV
# sources, re-indexing, candidates, Engram, MoE, mHC) with a 16-token window: fast
# enough on a 2-core CPU for tests that run many requests through the engine.
MICRO_OVERRIDES: tuple[tuple[str, Any], ...] = (
    ("num_hidden_layers", 4), ("compress_ratios", (0, 2, 1, 1)),
    ("kv_source_layer_ids", (1, 2)), ("index_source_layer_ids", (1, 2, 3)),
    ("candidate_source_layer_id", 2), ("engram_layer_ids", (0,)),
    ("n_routed_experts", 4), ("sliding_window", 16),
)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class ModelSource:
    """Random weights of ``preset`` with ``seed``, or the checkpoint in ``checkpoint``.

    Presets: the runtime's ``tiny`` / ``mid`` / ``flash``, plus ``micro`` (``tiny`` cut
    to 4 layers and a 16-token window, ``MICRO_OVERRIDES``) for fast tests, all with
    random weights drawn from ``seed``; and ``testbed``: the *trained* checkpoint that
    ships in ``runtime/testbed`` (``seed`` is not used; overrides are refused).

    ``overrides`` replaces config fields of a preset (``(("num_hidden_layers", 4), ...)``);
    tests use it for a model smaller than ``tiny``. ``dtype`` is the weights' dtype
    (None: the config's ``torch_dtype``), ``device`` where they live.
    """

    preset: str | None = "tiny"
    seed: int = 0
    checkpoint: str | None = None
    overrides: tuple[tuple[str, Any], ...] = ()
    dtype: str | None = None
    device: str = "cpu"

    def __post_init__(self) -> None:
        if (self.preset is None) == (self.checkpoint is None):
            raise EngineError("builtin engine: give exactly one of preset or checkpoint")
        if self.checkpoint is not None and self.overrides:
            raise EngineError("builtin engine: config overrides apply to presets only")
        if self.preset == TESTBED and self.overrides:
            raise EngineError("builtin engine: the trained testbed takes no config overrides")
        if self.dtype is not None and self.dtype not in DTYPES:
            raise EngineError(f"builtin engine: dtype must be one of {sorted(DTYPES)}, "
                              f"got {self.dtype!r}")
        check_seed(self.seed, "builtin engine: seed")
        check_device(self.device, "builtin engine: device")
        object.__setattr__(self, "overrides", tuple((str(k), _hashable(v))
                                                    for k, v in self.overrides))

    @classmethod
    def micro(cls, seed: int = 0, **kwargs) -> ModelSource:
        """The ``micro`` preset: ``tiny`` cut to 4 layers and a 16-token window."""
        return cls(preset="micro", seed=seed, **kwargs)

    @property
    def directory(self) -> Path | None:
        """The checkpoint folder the weights come from (None: random weights)."""
        if self.preset == TESTBED:
            from runtime.testbed import testbed_dir

            try:
                return testbed_dir()
            except CheckpointError as exc:
                raise EngineError(str(exc)) from None
        return Path(self.checkpoint) if self.checkpoint is not None else None

    def describe(self) -> dict:
        """JSON-able identity of the weights (stored with every run)."""
        if self.preset == TESTBED:
            from runtime.testbed import testbed_manifest

            manifest = testbed_manifest()
            return {"preset": TESTBED, "checkpoint": str(self.directory),
                    "recipe_digest": manifest["recipe_digest"],
                    "weights_sha256": manifest["sha256"].get("model.safetensors"),
                    "dtype": self.dtype, "device": self.device}
        if self.checkpoint is not None:
            return {"checkpoint": str(self.checkpoint), "dtype": self.dtype, "device": self.device}
        return {"preset": self.preset, "seed": self.seed,
                "overrides": {k: _jsonable(v) for k, v in self.overrides},
                "dtype": self.dtype, "device": self.device}

    def config(self):
        """The model config this source yields (reads config.json for a checkpoint)."""
        from runtime.config import V41Config

        if self.directory is not None:
            from runtime.checkpoint import read_config

            return read_config(self.directory)
        if self.preset == "micro":
            config = V41Config.preset("tiny").replace(**dict(MICRO_OVERRIDES))
        else:
            config = V41Config.preset(self.preset)
        return config.replace(**dict(self.overrides)) if self.overrides else config

    def load(self):
        """Build the ``V41Weights`` (random or from the checkpoint)."""
        from runtime.weights import V41Weights

        dtype = DTYPES[self.dtype] if self.dtype else None
        if self.directory is not None:
            from runtime.checkpoint import load_weights

            directory = self.directory
            if not directory.is_dir():
                raise EngineError(f"builtin engine: checkpoint {directory} is not a directory")
            return load_weights(directory, dtype=dtype, device=self.device)
        return V41Weights.random(self.config(), self.seed, dtype=dtype, device=self.device)

    def tokenizer(self):
        """The text tokenizer, read by Hugging Face ``tokenizers``: the checkpoint's
        ``tokenizer.json`` when present, else the byte-level test tokenizer over the
        model's vocabulary, built as that file would be (one encoder either way)."""
        from runtime.tokenizer import ByteTokenizer
        from runtime.tokenizer_file import FileTokenizer, load_tokenizer

        vocab_size = self.config().vocab_size
        if self.directory is not None:
            path = self.directory / "tokenizer.json"
            if path.is_file():
                return load_tokenizer(path, vocab_size)
        return FileTokenizer(ByteTokenizer(vocab_size=vocab_size).to_hf(),
                             f"the byte tokenizer of vocabulary {vocab_size}", vocab_size)


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


class WeightsPool:
    """Loads each ``ModelSource`` once and shares the weights (thread-safe)."""

    def __init__(self) -> None:
        self._weights: dict[ModelSource, Any] = {}
        self._lock = threading.Lock()

    def weights(self, source: ModelSource):
        with self._lock:
            if source not in self._weights:
                self._weights[source] = source.load()
            return self._weights[source]

    def __len__(self) -> int:
        return len(self._weights)
