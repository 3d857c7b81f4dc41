"""State dict <-> stored tensors: quantise on save, check and dequantise on load.

``encode`` turns a float state dict (released names) into the tensors a checkpoint
holds; ``decode`` checks stored tensors against the names/shapes the model expects and
returns float tensors. Every problem is one :class:`CheckpointError` line naming the
tensor (and file) and what was expected.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from runtime.checkpoint import formats
from runtime.checkpoint.naming import (
    FP8_BLOCK,
    MXFP4_BLOCK,
    StoredFormat,
    is_ignored,
    release_format,
    scale_name,
)
from runtime.errors import CheckpointError

WEIGHT_FORMATS = ("release", "unquantized")
_FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def stored_format(name: str, tensor: torch.Tensor, weight_format: str) -> StoredFormat:
    if weight_format == "release":
        return release_format(name, tensor.ndim)
    if weight_format == "unquantized":
        return StoredFormat("keep")
    check_weight_format(weight_format)
    raise AssertionError("unreachable: a known weight format")


def check_weight_format(weight_format: str) -> str:
    """``weight_format`` when it is one of ``WEIGHT_FORMATS``, else a ``CheckpointError``."""
    if weight_format not in WEIGHT_FORMATS:
        raise CheckpointError(f"weight format: expected one of {WEIGHT_FORMATS}, got "
                              f"{weight_format!r}")
    return weight_format


def encode(state: Mapping[str, torch.Tensor], weight_format: str = "release") -> dict[str, torch.Tensor]:
    """Float tensors by released name -> stored tensors (weights, ``.scale`` tensors)."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        t = tensor.detach().to("cpu")
        fmt = stored_format(name, t, weight_format)
        if fmt.kind == "fp8":
            out[name], out[scale_name(name)] = formats.quantize_fp8_block(t, fmt.block)
        elif fmt.kind == "mxfp4":
            out[name], out[scale_name(name)] = formats.quantize_mxfp4(t, MXFP4_BLOCK)
        elif fmt.kind == "float32":
            out[name] = t.to(torch.float32)
        elif fmt.kind == "bfloat16":
            out[name] = t.to(torch.bfloat16)
        else:
            out[name] = t
    return out


def decode(
    stored: Mapping[str, torch.Tensor],
    expected: Mapping[str, tuple[tuple[int, ...], torch.dtype]],
    file_of: Mapping[str, Path] | None = None,
) -> dict[str, torch.Tensor]:
    """Stored tensors -> float tensors of the expected shapes and dtypes.

    ``expected`` maps each model tensor name to (shape, dtype). A stored weight with a
    ``.scale`` partner is dequantised according to its stored dtype (e4m3: FP8 block;
    int8/uint8: packed MXFP4); any other stored tensor must be float of the right shape.
    """
    file_of = file_of or {}

    def where(name: str) -> str:
        return f"{file_of[name]}: " if name in file_of else ""

    used: set[str] = set()
    out: dict[str, torch.Tensor] = {}
    for name, (shape, dtype) in expected.items():
        if name not in stored:
            raise CheckpointError(f"checkpoint: missing tensor {name} (expected shape {list(shape)})")
        t = stored[name]
        used.add(name)
        sname = scale_name(name) if name.endswith(".weight") else None
        if sname is not None and sname in stored:
            used.add(sname)
            value = _dequantize(name, t, stored[sname], tuple(shape), where(name))
        elif t.dtype in _FLOAT_DTYPES:
            if tuple(t.shape) != tuple(shape):
                raise CheckpointError(
                    f"{where(name)}tensor {name}: shape {list(t.shape)}, expected {list(shape)}"
                )
            value = t
        else:
            raise CheckpointError(
                f"{where(name)}tensor {name}: stored as {t.dtype} without its scale tensor "
                f"{sname or '(none)'}; expected a float tensor or a quantised weight with a scale"
            )
        out[name] = value.to(dtype)
    extra = sorted(n for n in stored if n not in used and not is_ignored(n))
    if extra:
        raise CheckpointError(
            f"{where(extra[0])}unexpected tensor {extra[0]} (not part of this config's model"
            + (f"; {len(extra) - 1} more" if len(extra) > 1 else "") + ")"
        )
    return out


def _dequantize(name: str, q: torch.Tensor, scale: torch.Tensor, shape: tuple[int, ...],
                where: str) -> torch.Tensor:
    if len(shape) != 2:
        raise CheckpointError(f"{where}tensor {name}: quantised but the model expects shape {list(shape)}")
    if scale.dtype not in (torch.float8_e8m0fnu, torch.uint8):
        raise CheckpointError(
            f"{where}tensor {scale_name(name)}: dtype {scale.dtype}, expected float8_e8m0fnu (ue8m0)"
        )
    rows, cols = shape
    if q.dtype == torch.float8_e4m3fn:
        fmt = release_format(name, 2)
        block = fmt.block if fmt.kind == "fp8" else FP8_BLOCK
        want_scale = formats.scale_shape(shape, block)
        if tuple(q.shape) != shape:
            raise CheckpointError(f"{where}tensor {name}: shape {list(q.shape)}, expected {list(shape)}")
        if tuple(scale.shape) != want_scale:
            raise CheckpointError(
                f"{where}tensor {scale_name(name)}: shape {list(scale.shape)}, expected "
                f"{list(want_scale)} ({block[0]}x{block[1]} blocks of {list(shape)})"
            )
        return formats.dequantize_fp8_block(q, scale, block)
    if q.dtype in (torch.int8, torch.uint8):
        want_q = (rows, cols // 2)
        want_scale = formats.scale_shape(shape, (1, MXFP4_BLOCK))
        if tuple(q.shape) != want_q:
            raise CheckpointError(
                f"{where}tensor {name}: packed FP4 shape {list(q.shape)}, expected {list(want_q)} "
                f"(two e2m1 values per byte of {list(shape)})"
            )
        if tuple(scale.shape) != want_scale:
            raise CheckpointError(
                f"{where}tensor {scale_name(name)}: shape {list(scale.shape)}, expected {list(want_scale)}"
            )
        return formats.dequantize_mxfp4(q, scale, MXFP4_BLOCK)
    raise CheckpointError(
        f"{where}tensor {name}: dtype {q.dtype} with a scale tensor, expected float8_e4m3fn or int8 (packed FP4)"
    )
