"""Checkpoint directories: ``config.json`` + safetensors (one file, or shards + index).

Layout, as released: ``config.json`` with the backbone under ``text_config`` and
``quantization_config`` at the top level; ``model.safetensors`` or
``model-0000k-of-0000n.safetensors`` with ``model.safetensors.index.json``
(``weight_map``: tensor -> file). Tensors use the released names (see ``naming``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import torch

from runtime.checkpoint import codec
from runtime.checkpoint.naming import FP8_BLOCK
from runtime.checkpoint.safetensors_io import TensorEntry, read_header, read_tensors, write_tensors
from runtime.checkpoint.shards import INDEX_FILE, check_listed, read_index
from runtime.config import V41Config
from runtime.errors import CheckpointError, ConfigError
from runtime.paths import make_directory

CONFIG_FILE = "config.json"
SINGLE_FILE = "model.safetensors"
DEFAULT_SHARD_BYTES = 4 * 1024**3


def quantization_config(weight_format: str) -> dict | None:
    """The top-level ``quantization_config`` the release declares (None if unquantised)."""
    if weight_format != "release":
        return None
    return {
        "quant_method": "fp8",
        "fmt": "e4m3",
        "scale_fmt": "ue8m0",
        "activation_scheme": "dynamic",
        "weight_block_size": list(FP8_BLOCK),
    }


def write_config(config: V41Config, directory: Path, weight_format: str) -> None:
    data = config.to_hf_dict()
    quant = quantization_config(weight_format)
    if quant is not None:
        data["quantization_config"] = quant
        data["text_config"]["expert_dtype"] = "fp4"
    (directory / CONFIG_FILE).write_text(json.dumps(data, indent=2) + "\n")


def read_config(directory: Path) -> V41Config:
    path = directory / CONFIG_FILE
    if not path.is_file():
        raise CheckpointError(f"{path}: no config.json in the checkpoint directory")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: cannot read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("text_config"), dict):
        raise CheckpointError(f"{path}: expected an object with a nested text_config object")
    try:
        return V41Config.from_hf_dict(data, source=str(path))
    except ConfigError as exc:
        raise CheckpointError(str(exc)) from None


def output_directory(directory: str | Path) -> Path:
    """``directory`` created (with its parents) for a checkpoint to be written into; an
    existing regular file there or a folder that cannot be made is a ``CheckpointError``
    naming it (checked before any weights are drawn)."""
    return make_directory(directory, CheckpointError, f"checkpoint directory {directory}")


def save_state_dict(
    state: Mapping[str, torch.Tensor],
    config: V41Config,
    directory: str | Path,
    weight_format: str = "release",
    max_shard_bytes: int = DEFAULT_SHARD_BYTES,
) -> dict:
    """Write ``state`` (float tensors, released names) and ``config`` to ``directory``."""
    out_dir = output_directory(directory)
    stored = codec.encode(state, weight_format)
    shards: list[dict[str, torch.Tensor]] = [{}]
    sizes = [0]
    for name, t in stored.items():
        nbytes = t.numel() * t.element_size()
        if shards[-1] and sizes[-1] + nbytes > max_shard_bytes:
            shards.append({})
            sizes.append(0)
        shards[-1][name] = t
        sizes[-1] += nbytes
    for stale in [*out_dir.glob("model*.safetensors"), out_dir / INDEX_FILE]:
        if stale.exists():
            stale.unlink()
    if len(shards) == 1:
        write_tensors(out_dir / SINGLE_FILE, shards[0])
    else:
        weight_map = {}
        for k, shard in enumerate(shards, start=1):
            fname = f"model-{k:05d}-of-{len(shards):05d}.safetensors"
            write_tensors(out_dir / fname, shard)
            weight_map.update({name: fname for name in shard})
        index = {"metadata": {"total_size": sum(sizes)}, "weight_map": weight_map}
        (out_dir / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n")
    write_config(config, out_dir, weight_format)
    return {
        "directory": str(out_dir),
        "tensors": len(stored),
        "bytes": sum(sizes),
        "files": len(shards),
        "weight_format": weight_format,
    }


def tensor_entries(directory: Path) -> dict[str, TensorEntry]:
    """Every stored tensor's header entry, after checking each file's header (and the
    shard index, ``runtime/checkpoint/shards.py``, when there is one)."""
    index = read_index(directory)
    if index is not None:
        files = index.files
    else:
        files = sorted(p.name for p in directory.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"{directory}: no .safetensors files in the checkpoint directory")
    entries: dict[str, TensorEntry] = {}
    for fname in files:
        path = directory / fname
        for name, entry in read_header(path).items():
            if name in entries:
                raise CheckpointError(f"{path}: tensor {name} is also stored in {entries[name].file}")
            entries[name] = entry
    if index is not None:
        check_listed(index, {name: e.file.name for name, e in entries.items()})
    return entries


def load_state_dict(
    directory: str | Path,
    expected: Mapping[str, tuple[tuple[int, ...], torch.dtype]],
) -> dict[str, torch.Tensor]:
    """Read, check and dequantise a checkpoint's tensors into ``expected`` shapes/dtypes."""
    root = Path(directory)
    if not root.is_dir():
        raise CheckpointError(f"{root}: not a checkpoint directory")
    entries = tensor_entries(root)
    by_file: dict[Path, list[str]] = {}
    for name, entry in entries.items():
        by_file.setdefault(entry.file, []).append(name)
    stored: dict[str, torch.Tensor] = {}
    for path, names in by_file.items():
        stored.update(read_tensors(path, names))
    return codec.decode(stored, expected, {n: e.file for n, e in entries.items()})
