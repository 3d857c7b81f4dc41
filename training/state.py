"""The resumable state of a training run, in one folder.

A device command runs at most 10 minutes, so a run is a sequence of calls that each
continue where the last stopped. The folder holds the master weights
(``weights.safetensors``, float32), the optimizer (``optimizer.pt``: AdamW moments, read
back with ``weights_only=True``), and ``progress.json`` (step, elapsed time, the data
sampler's state, the recipe's digest). Each file is written to a temporary name and
renamed, so a run killed mid-save keeps the previous state.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from runtime.errors import ConfigError

WEIGHTS = "weights.safetensors"
OPTIMIZER = "optimizer.pt"
PROGRESS = "progress.json"


@dataclass
class Progress:
    step: int
    elapsed_s: float
    sampler: dict
    recipe_digest: str


def save_state(folder: Path, weights: torch.nn.Module, optimizer: torch.optim.Optimizer,
               progress: Progress) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {n: p.detach().to("cpu").contiguous() for n, p in weights.named_parameters()}
    save_file(tensors, str(folder / (WEIGHTS + ".tmp")))
    torch.save(optimizer.state_dict(), folder / (OPTIMIZER + ".tmp"))
    (folder / (PROGRESS + ".tmp")).write_text(json.dumps(progress.__dict__))
    for name in (WEIGHTS, OPTIMIZER, PROGRESS):
        os.replace(folder / (name + ".tmp"), folder / name)


def has_state(folder: Path) -> bool:
    return all((folder / n).is_file() for n in (WEIGHTS, OPTIMIZER, PROGRESS))


def read_weights(folder: Path, weights: torch.nn.Module) -> None:
    """Copy the saved master weights of ``folder`` into ``weights`` (same names)."""
    stored = load_file(str(folder / WEIGHTS))
    params = dict(weights.named_parameters())
    if set(stored) != set(params):
        raise ConfigError(f"{folder / WEIGHTS}: tensor names differ from the recipe's model")
    with torch.no_grad():
        for name, param in params.items():
            param.copy_(stored[name])


def load_state(folder: Path, weights: torch.nn.Module, optimizer: torch.optim.Optimizer,
               recipe_digest: str) -> Progress:
    progress = Progress(**json.loads((folder / PROGRESS).read_text()))
    if progress.recipe_digest != recipe_digest:
        raise ConfigError(f"{folder / PROGRESS}: state of another recipe "
                          f"(digest {progress.recipe_digest[:12]}, this recipe {recipe_digest[:12]})")
    read_weights(folder, weights)
    device = next(weights.parameters()).device
    optimizer.load_state_dict(torch.load(folder / OPTIMIZER, map_location=device, weights_only=True))
    return progress
