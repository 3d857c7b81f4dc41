"""Checkpoints sharded like the release: the project's single-file checkpoint split here
(with the safetensors package, not the project's writer) into per-layer shards plus
``model.safetensors.index.json``, loaded bit for bit; a bad index is one line naming it."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from runtime.checkpoint import load_checkpoint, save_checkpoint
from runtime.config import V41Config
from runtime.errors import CheckpointError
from runtime.weights import V41Weights

INDEX = "model.safetensors.index.json"
N_SHARDS = 3
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def config():
    return V41Config.preset("tiny").replace(n_routed_experts=2, num_experts_per_tok=1)


def shard_of(name: str, n_layers: int) -> int:
    """The release groups tensors by layer: layers split evenly over the first shards,
    the embeddings, final norm and head in the last one."""
    if name.startswith("layers."):
        return int(name.split(".")[1]) * (N_SHARDS - 1) // n_layers
    return N_SHARDS - 1


def split(single, out, n_layers: int) -> dict[str, str]:
    """Rewrite ``single``'s model.safetensors as shards + index in ``out``; the weight map."""
    out.mkdir()
    shutil.copy(single / "config.json", out / "config.json")
    groups: list[dict[str, torch.Tensor]] = [{} for _ in range(N_SHARDS)]
    with safe_open(str(single / "model.safetensors"), framework="pt") as fh:
        for name in fh.keys():  # noqa: SIM118 - safe_open is no mapping
            groups[shard_of(name, n_layers)][name] = fh.get_tensor(name)
    weight_map, total = {}, 0
    for k, group in enumerate(groups, start=1):
        fname = f"model-{k:05d}-of-{N_SHARDS:05d}.safetensors"
        save_file(group, str(out / fname), metadata={"format": "pt"})
        weight_map.update({name: fname for name in group})
        total += sum(t.numel() * t.element_size() for t in group.values())
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (out / INDEX).write_text(json.dumps(index, indent=2))
    return weight_map


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


@pytest.fixture(scope="module")
def sharded(tmp_path_factory, config):
    """(single-file dir, sharded dir, the source weights) of a release-format checkpoint."""
    root = tmp_path_factory.mktemp("shards")
    weights = V41Weights.random(config, seed=7)
    save_checkpoint(weights, root / "single")
    split(root / "single", root / "sharded", config.num_hidden_layers)
    return root / "single", root / "sharded", weights


def test_release_sharded_checkpoint_loads_bit_for_bit(sharded):
    single, shards, _ = sharded
    assert len(list(shards.glob("model-*-of-00003.safetensors"))) == N_SHARDS
    config_a, a = load_checkpoint(single)
    config_b, b = load_checkpoint(shards)
    assert config_a == config_b
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for name, value in sa.items():
        assert sb[name].dtype == value.dtype and torch.equal(bits(sb[name]), bits(value)), name


def test_unquantized_sharded_checkpoint_is_the_source_bit_for_bit(tmp_path, config):
    weights = V41Weights.random(config, seed=8)
    save_checkpoint(weights, tmp_path / "single", weight_format="unquantized")
    split(tmp_path / "single", tmp_path / "sharded", config.num_hidden_layers)
    _, loaded = load_checkpoint(tmp_path / "sharded")
    for name, value in weights.state_dict().items():
        assert torch.equal(bits(loaded.state_dict()[name]), bits(value)), name


@pytest.fixture
def damaged(sharded, tmp_path):
    """A fresh copy of the sharded checkpoint to break, and its weight map."""
    copy = tmp_path / "ck"
    shutil.copytree(sharded[1], copy)
    return copy, json.loads((copy / INDEX).read_text())


def load_error(directory, match: str) -> str:
    with pytest.raises(CheckpointError, match=match) as info:
        load_checkpoint(directory)
    message = str(info.value)
    assert "\n" not in message and INDEX in message
    return message


def test_missing_shard(damaged):
    directory, index = damaged
    (directory / "model-00002-of-00003.safetensors").unlink()
    first = next(n for n, f in index["weight_map"].items() if f == "model-00002-of-00003.safetensors")
    load_error(directory, rf"lists model-00002-of-00003\.safetensors \(for tensor {first}\), "
                          r"which is not in ")


def test_tensor_listed_in_a_shard_that_lacks_it(damaged):
    directory, index = damaged
    index["weight_map"]["norm.weight"] = "model-00001-of-00003.safetensors"
    (directory / INDEX).write_text(json.dumps(index))
    load_error(directory, r"tensor norm\.weight is listed in model-00001-of-00003\.safetensors, which "
                          r"does not hold it \(it is stored in model-00003-of-00003\.safetensors\)")


def test_tensor_in_an_unlisted_file(damaged):
    directory, index = damaged
    moved = {n for n, f in index["weight_map"].items() if f == "model-00003-of-00003.safetensors"}
    for name in moved:
        index["weight_map"][name] = "model-00002-of-00003.safetensors"
    (directory / INDEX).write_text(json.dumps(index))
    load_error(directory, r"tensor \S+ is listed in model-00002-of-00003\.safetensors, which does not "
                          r"hold it \(no listed shard holds it\)")


@pytest.mark.parametrize("edit, match", [
    (lambda text, index: text[: len(text) // 2], r"not valid JSON \(.* at line \d+\)"),
    (lambda text, index: json.dumps({"metadata": {}}), r"expected an object with a non-empty "
                                                        r"weight_map object"),
    (lambda text, index: json.dumps([index]), "expected an object with a non-empty weight_map"),
    (lambda text, index: json.dumps({"weight_map": {**index["weight_map"], "norm.weight":
                                                    "../model-00003-of-00003.safetensors"}}),
     r"weight_map\['norm\.weight'\] is '\.\./model-00003-of-00003\.safetensors', expected the name "
     r"of a \.safetensors file in the checkpoint directory"),
    (lambda text, index: json.dumps({"weight_map": {**index["weight_map"], "norm.weight": 3}}),
     r"weight_map\['norm\.weight'\] is 3, expected the name of a \.safetensors file"),
])
def test_malformed_index(damaged, edit, match):
    directory, index = damaged
    text = (directory / INDEX).read_text()
    (directory / INDEX).write_text(edit(text, index))
    load_error(directory, match)
