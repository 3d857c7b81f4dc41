"""Safetensors files, checked before they are read (never unpickled).

Why a header check of our own: a truncated download or a hand-edited file should give
a one-line :class:`CheckpointError` naming the file and the tensor ("tensor X needs
bytes [a, b) but the data section holds N"), not a Rust panic text or a shape error
deep inside the model. The check reads only the JSON header; the tensors are then read
with the ``safetensors`` package.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from runtime.errors import CheckpointError

# The dtypes a V4.1 checkpoint uses; anything else is refused by name.
DTYPES: dict[str, torch.dtype] = {
    "F32": torch.float32,
    "BF16": torch.bfloat16,
    "F16": torch.float16,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E8M0": torch.float8_e8m0fnu,
    "I8": torch.int8,
    "U8": torch.uint8,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
MAX_HEADER_BYTES = 100 * 1024 * 1024


@dataclass(frozen=True)
class TensorEntry:
    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]
    file: Path


def read_header(path: Path) -> dict[str, TensorEntry]:
    """Validate ``path``'s header against its size; return its tensors by name."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise CheckpointError(f"{path}: truncated: {size} bytes, not even the 8-byte header length")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES or 8 + n > size:
                raise CheckpointError(
                    f"{path}: truncated or not safetensors: header of {n} bytes but the file has {size}"
                )
            raw = fh.read(n)
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise CheckpointError(f"{path}: header is not valid JSON (not a safetensors file?)") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: header is not a JSON object")
    data_bytes = size - 8 - n
    entries: dict[str, TensorEntry] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        entries[name] = _entry(path, name, info, data_bytes)
    return entries


def _entry(path: Path, name: str, info: object, data_bytes: int) -> TensorEntry:
    if not isinstance(info, dict):
        raise CheckpointError(f"{path}: tensor {name}: header entry is not an object")
    dtype_name = info.get("dtype")
    if dtype_name not in DTYPES:
        raise CheckpointError(
            f"{path}: tensor {name}: unknown dtype {dtype_name!r}, expected one of {sorted(DTYPES)}"
        )
    shape = info.get("shape")
    offsets = info.get("data_offsets")
    if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
        raise CheckpointError(f"{path}: tensor {name}: malformed shape {shape!r}")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
        raise CheckpointError(f"{path}: tensor {name}: malformed data_offsets {offsets!r}")
    dtype = DTYPES[dtype_name]
    need = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    begin, end = offsets
    if end - begin != need or begin < 0:
        raise CheckpointError(
            f"{path}: tensor {name}: data_offsets {offsets} hold {end - begin} bytes, "
            f"{dtype_name} {shape} needs {need}"
        )
    if end > data_bytes:
        raise CheckpointError(
            f"{path}: truncated: tensor {name} needs bytes [{begin}, {end}) of the data "
            f"section but the file holds only {data_bytes}"
        )
    return TensorEntry(name=name, dtype=dtype, shape=tuple(shape), file=path)


def read_tensors(path: Path, names: list[str]) -> dict[str, torch.Tensor]:
    """Read ``names`` from one (already header-checked) file."""
    out: dict[str, torch.Tensor] = {}
    try:
        with safe_open(str(path), framework="pt", device="cpu") as fh:
            for name in names:
                out[name] = fh.get_tensor(name)
    except Exception as exc:  # safetensors raises its own Rust-side error types
        raise CheckpointError(f"{path}: cannot read tensors ({type(exc).__name__}: {exc})") from None
    return out


def write_tensors(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    for name, t in tensors.items():
        if t.dtype not in DTYPE_NAMES:
            raise CheckpointError(f"tensor {name}: cannot store dtype {t.dtype}")
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata={"format": "pt"})
