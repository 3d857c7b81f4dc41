"""Checkpoint I/O in the released layout: safetensors only (never unpickled), released
tensor names, FP8 / MXFP4 weight formats where the release uses them, ``config.json``
with a nested ``text_config``.

    save_checkpoint(weights, directory)          # quantise + write
    config, weights = load_checkpoint(directory) # check + dequantise into V41Weights
    weights = load_weights(directory)
"""

from __future__ import annotations

from runtime.checkpoint.codec import WEIGHT_FORMATS
from runtime.checkpoint.io import load_state_dict, read_config, save_state_dict
from runtime.checkpoint.model_io import (
    init_random_checkpoint,
    load_checkpoint,
    load_weights,
    save_checkpoint,
)

__all__ = [
    "WEIGHT_FORMATS",
    "init_random_checkpoint",
    "load_checkpoint",
    "load_state_dict",
    "load_weights",
    "read_config",
    "save_checkpoint",
    "save_state_dict",
]
