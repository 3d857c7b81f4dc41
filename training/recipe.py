"""The training recipe as data: one frozen dataclass, read from a TOML file.

Every number that decides the trained model lives here (model shape, data seed, batch,
schedule, optimizer, losses), so the recipe file shipped beside the checkpoint is the
whole description of how it was made. Unknown or ill-typed fields are one-line errors
naming the file and field.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from runtime.errors import ConfigError
from validate.tomlfile import read_toml


@dataclass(frozen=True)
class Recipe:
    """How the testbed is trained.

    preset: the ``V41Config`` preset whose shape is trained (``testbed``).
    init_seed: seed of the initial random weights (``V41Weights.random``).
    data_seed: seed of the example stream (``tasks.testbed.training_example``); the
        test sets are drawn from other seeds and excluded, see ``tasks.testbed``.
    task_weights: task name -> share of training examples.
    tokens_per_batch: positions per optimizer step (rows x length, padding included).
    lengths: the fixed row lengths a batch may have (a batch holds examples of one
        length bucket: fixed shapes for the GPU, little padding).
    steps: optimizer steps of the whole schedule; warmup_steps linear warm-up, then
        cosine decay from lr to lr * min_lr_ratio.
    indexer_loss_weight: weight of the DSA indexer KL loss beside the cross-entropy.
    dense_index_steps, dense_index_topk: DeepSeek-V3.2's dense warm-up of sparse
        attention: for the first steps every layer attends to (up to) dense_index_topk
        compressed entries instead of the config's index_topk, so attention can find the
        far-back records and the indexer (trained by KL to that attention) learns to
        pick them; with a top-32 from the start neither can (measured: answer-token
        accuracy on testbed_lookup flat at 0.90, the value digits never learned, over
        1,342 steps). The served model keeps the config's top-k.
    bias_update_rate: DeepSeek-V3's auxiliary-loss-free balancing step for the MoE gate
        bias (bias += rate * sign(mean load - load) per step).
    qat: train through the release storage roundings of the weights (FP8 blocks, MXFP4
        experts, bf16 elsewhere) with straight-through gradients, so the exported
        checkpoint holds exactly the weights that were trained.
    autocast: "bf16" (bf16 autocast on CUDA) or "none" (float32, the CPU smoke run).
    compile: run QAT view + forward + loss as one ``torch.compile`` region. Static
        shapes compile one graph per (bucket length, dense/sparse phase), minutes each
        (262 s for one at length 512 on the H200); compile_dynamic marks the batch's
        rows and length dynamic so one graph per phase serves every bucket. Both change
        how fast a step runs, not what it computes; compile_dynamic appears in to_dict
        (and the digest) only when set, so recipes written before it keep their digest.
    """

    preset: str = "testbed"
    init_seed: int = 0
    data_seed: int = 1
    task_weights: dict[str, float] = field(default_factory=dict)
    tokens_per_batch: int = 65536
    lengths: tuple[int, ...] = (256, 512, 1024)
    steps: int = 6000
    warmup_steps: int = 200
    lr: float = 2e-3
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    indexer_loss_weight: float = 0.1
    dense_index_steps: int = 0
    dense_index_topk: int = 256
    bias_update_rate: float = 1e-3
    qat: bool = True
    autocast: str = "bf16"
    compile: bool = False
    compile_dynamic: bool = False
    log_every: int = 20
    save_every: int = 500

    def __post_init__(self) -> None:
        if self.autocast not in ("bf16", "none"):
            raise ConfigError(f"recipe.autocast: expected 'bf16' or 'none', got {self.autocast!r}")
        if not self.task_weights or any(w <= 0 for w in self.task_weights.values()):
            raise ConfigError("recipe.task_weights: expected a table of task = positive share")
        if not self.lengths or any(n <= 0 for n in self.lengths) or list(self.lengths) != sorted(
                set(self.lengths)):
            raise ConfigError(f"recipe.lengths: expected increasing positive lengths, got {self.lengths}")
        if self.tokens_per_batch < max(self.lengths):
            raise ConfigError("recipe.tokens_per_batch: must hold at least one row of the longest length")
        if not 0 <= self.warmup_steps < self.steps:
            raise ConfigError("recipe.warmup_steps: expected 0 <= warmup_steps < steps")

    def to_dict(self) -> dict:
        out = asdict(self)
        out["lengths"] = list(self.lengths)
        if not self.compile_dynamic:
            del out["compile_dynamic"]
        return out

    def digest(self) -> str:
        """sha256 of the canonical JSON of the recipe (stored beside the checkpoint)."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


_TYPES = {f.name: f for f in fields(Recipe)}


def load_recipe(path: str | Path) -> Recipe:
    """Read a recipe TOML file (flat keys plus a ``[task_weights]`` table)."""
    path = Path(path)
    doc = read_toml(path, ConfigError, "the recipe")
    values = {}
    for key, value in doc.items():
        if key not in _TYPES:
            raise ConfigError(f"{path}: unknown recipe field {key!r}")
        default = _TYPES[key].default
        if key == "task_weights":
            if not isinstance(value, dict) or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) for v in value.values()):
                raise ConfigError(f"{path}: task_weights: expected a table of task = number")
            value = {str(k): float(v) for k, v in value.items()}
        elif key == "lengths":
            if not isinstance(value, list) or not all(isinstance(v, int) for v in value):
                raise ConfigError(f"{path}: lengths: expected a list of integers")
            value = tuple(value)
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise ConfigError(f"{path}: {key}: expected true or false, got {value!r}")
        elif isinstance(default, int):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{path}: {key}: expected an integer, got {value!r}")
        elif isinstance(default, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{path}: {key}: expected a number, got {value!r}")
            value = float(value)
        elif isinstance(default, str) and not isinstance(value, str):
            raise ConfigError(f"{path}: {key}: expected a string, got {value!r}")
        values[key] = value
    try:
        return Recipe(**values)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
