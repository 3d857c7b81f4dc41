"""The index of a sharded checkpoint, ``model.safetensors.index.json``, checked in full.

Why: the release ships its weights as several safetensors files plus this index, whose
``weight_map`` names the file of every tensor (the Hugging Face layout; the loader of
vLLM 0.33.0 reads the files it lists). A hand-edited or half-downloaded index must stop
the load with one line naming the index and what was expected (which shard is missing,
which tensor is not where the index says), before gigabytes are read, and never let an
entry point outside the checkpoint folder. The index is read by ``read_index`` before
any shard; ``check_listed`` compares it with the shards' headers afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from runtime.errors import CheckpointError

INDEX_FILE = "model.safetensors.index.json"
SHARD_SUFFIX = ".safetensors"


@dataclass(frozen=True)
class ShardIndex:
    """``weight_map``: tensor name -> shard file name (a plain name in ``path``'s folder)."""

    path: Path
    weight_map: Mapping[str, str]

    @property
    def files(self) -> list[str]:
        return sorted(set(self.weight_map.values()))


def read_index(directory: Path) -> ShardIndex | None:
    """The checked index of ``directory`` (None when it has no index file)."""
    path = directory / INDEX_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: cannot read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(
            f"{path}: expected an object with a non-empty weight_map object (tensor name -> shard file)"
        )
    for name, fname in weight_map.items():
        if not (isinstance(fname, str) and fname.endswith(SHARD_SUFFIX) and Path(fname).name == fname
                and fname not in (".", "..") and "\\" not in fname):
            raise CheckpointError(
                f"{path}: weight_map[{name!r}] is {fname!r}, expected the name of a "
                f"{SHARD_SUFFIX} file in the checkpoint directory"
            )
    first_tensor = {}
    for name, fname in weight_map.items():
        first_tensor.setdefault(fname, name)
    for fname, name in sorted(first_tensor.items()):
        if not (directory / fname).is_file():
            raise CheckpointError(
                f"{path}: lists {fname} (for tensor {name}), which is not in {directory}"
            )
    return ShardIndex(path, dict(weight_map))


def check_listed(index: ShardIndex, stored_in: Mapping[str, str]) -> None:
    """Every tensor of the index is stored in the shard the index names.

    ``stored_in``: tensor name -> the shard file name whose header holds it. Tensors a
    listed shard holds beyond the index are kept (the serving engines load them too)."""
    for name, fname in index.weight_map.items():
        actual = stored_in.get(name)
        if actual != fname:
            where = f"it is stored in {actual}" if actual else "no listed shard holds it"
            raise CheckpointError(
                f"{index.path}: tensor {name} is listed in {fname}, which does not hold it ({where})"
            )
