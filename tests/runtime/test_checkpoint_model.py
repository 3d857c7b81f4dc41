"""Whole-model checkpoints: V41Weights -> directory -> V41Weights, and the CLI writer."""

from __future__ import annotations

import json

import pytest
import torch

from runtime.checkpoint import load_checkpoint, read_config, save_checkpoint
from runtime.checkpoint.formats import dequantize_mxfp4, quantize_mxfp4
from runtime.config import V41Config
from runtime.errors import CheckpointError
from runtime.weights import V41Weights


@pytest.fixture(scope="module")
def small_config():
    # tiny with two experts: every tensor kind, a fraction of the bytes
    return V41Config.preset("tiny").replace(n_routed_experts=2, num_experts_per_tok=1)


def test_release_round_trip_is_idempotent(tmp_path, small_config):
    weights = V41Weights.random(small_config, seed=3)
    save_checkpoint(weights, tmp_path / "a")
    config, once = load_checkpoint(tmp_path / "a")
    assert config == small_config
    name = "layers.3.ffn.experts.1.w2.weight"
    original = weights.state_dict()[name]
    assert torch.equal(once.state_dict()[name], dequantize_mxfp4(*quantize_mxfp4(original)))
    assert not torch.equal(once.state_dict()[name], original)  # FP4 really rounded it
    save_checkpoint(once, tmp_path / "b")
    _, twice = load_checkpoint(tmp_path / "b")
    for key, value in once.state_dict().items():
        assert torch.equal(twice.state_dict()[key], value), key


def test_unquantized_round_trip_is_exact(tmp_path, small_config):
    weights = V41Weights.random(small_config, seed=4)
    save_checkpoint(weights, tmp_path / "u", weight_format="unquantized")
    _, loaded = load_checkpoint(tmp_path / "u")
    for key, value in weights.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key


def test_config_mismatch_names_the_tensor(tmp_path, small_config):
    save_checkpoint(V41Weights.random(small_config, seed=5), tmp_path / "c", weight_format="unquantized")
    data = json.loads((tmp_path / "c" / "config.json").read_text())
    data["text_config"]["moe_intermediate_size"] = 96
    (tmp_path / "c" / "config.json").write_text(json.dumps(data))
    with pytest.raises(CheckpointError, match=r"tensor layers\.0\.ffn\.experts\.0\.w1\.weight: shape"):
        load_checkpoint(tmp_path / "c")


@pytest.mark.slow
def test_cli_init_checkpoint_writes_a_release_format_tiny_checkpoint(tmp_path):
    from v41val.cli import main

    main(["init-checkpoint", "--preset", "tiny", "--seed", "0", "--json", str(tmp_path / "ck")])
    assert read_config(tmp_path / "ck") == V41Config.preset("tiny")  # loading is tested above
    assert (tmp_path / "ck" / "tokenizer.json").is_file()
    header_len = int.from_bytes((tmp_path / "ck" / "model.safetensors").read_bytes()[:8], "little")
    header = json.loads((tmp_path / "ck" / "model.safetensors").read_bytes()[8:8 + header_len])
    assert header["layers.0.ffn.experts.0.w1.weight"]["dtype"] == "I8"
    assert header["layers.0.attn.wq_a.weight"]["dtype"] == "F8_E4M3"
