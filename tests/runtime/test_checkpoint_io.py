"""Checkpoint directories: round trips and one-line errors, on a synthetic state dict."""

from __future__ import annotations

import json
import struct

import pytest
import torch

from runtime.checkpoint import formats, load_state_dict, read_config, save_state_dict
from runtime.config import V41Config
from runtime.errors import CheckpointError


def _state() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "embed.weight": torch.randn(16, 64, generator=g),
        "layers.0.attn.wq_a.weight": torch.randn(64, 64, generator=g),  # FP8 32x32
        "layers.0.attn.indexer.wq_b.weight": torch.randn(64, 32, generator=g),  # FP8 32x32
        "layers.0.ffn.experts.3.w2.weight": torch.randn(32, 64, generator=g),  # MXFP4
        "layers.0.ffn.shared_experts.w1.weight": torch.randn(96, 64, generator=g),  # FP8
        "layers.1.engram.embed.weight": torch.randn(10, 64, generator=g),  # FP8 1x32
        "layers.0.hc_attn_fn": torch.randn(24, 256, generator=g),  # float32 kept
        "layers.0.attn.attn_sink": torch.randn(4, generator=g),  # float32 kept
        "norm.weight": torch.randn(64, generator=g),  # bf16
    }


def _expected(state):
    return {k: (tuple(v.shape), torch.float32) for k, v in state.items()}


def _reference(name: str, w: torch.Tensor) -> torch.Tensor:
    """What the release format keeps of ``w`` (each rule written out)."""
    if name.endswith("experts.3.w2.weight"):
        return formats.dequantize_mxfp4(*formats.quantize_mxfp4(w))
    if name.endswith("engram.embed.weight"):
        return formats.dequantize_fp8_block(*formats.quantize_fp8_block(w, (1, 32)), (1, 32))
    if name.endswith(("wq_a.weight", "indexer.wq_b.weight", "shared_experts.w1.weight")):
        return formats.dequantize_fp8_block(*formats.quantize_fp8_block(w))
    if name.endswith(("hc_attn_fn", "attn_sink")):
        return w
    return w.to(torch.bfloat16).float()


@pytest.fixture
def tiny_config():
    return V41Config.preset("tiny")


def test_release_round_trip(tmp_path, tiny_config):
    state = _state()
    summary = save_state_dict(state, tiny_config, tmp_path / "ck")
    assert summary["files"] == 1 and summary["tensors"] == len(state) + 5  # 5 scale tensors
    header = _header(tmp_path / "ck" / "model.safetensors")
    assert header["layers.0.attn.wq_a.weight"]["dtype"] == "F8_E4M3"
    assert header["layers.0.attn.wq_a.scale"] == {**header["layers.0.attn.wq_a.scale"], "dtype": "F8_E8M0",
                                                  "shape": [2, 2]}
    assert header["layers.0.ffn.experts.3.w2.weight"]["dtype"] == "I8"
    assert header["layers.0.ffn.experts.3.w2.weight"]["shape"] == [32, 32]
    assert header["layers.0.ffn.experts.3.w2.scale"]["shape"] == [32, 2]
    assert header["layers.1.engram.embed.scale"]["shape"] == [10, 2]
    assert header["layers.0.hc_attn_fn"]["dtype"] == "F32"
    assert header["norm.weight"]["dtype"] == "BF16"
    loaded = load_state_dict(tmp_path / "ck", _expected(state))
    for name, w in state.items():
        assert torch.equal(loaded[name], _reference(name, w)), name
    # Saving what was loaded and loading again changes nothing (quantisation is idempotent).
    save_state_dict(loaded, tiny_config, tmp_path / "ck2")
    again = load_state_dict(tmp_path / "ck2", _expected(state))
    assert all(torch.equal(again[k], loaded[k]) for k in state)
    cfg_json = json.loads((tmp_path / "ck" / "config.json").read_text())
    assert cfg_json["quantization_config"]["weight_block_size"] == [32, 32]
    assert read_config(tmp_path / "ck") == tiny_config


def test_unquantized_round_trip_is_exact_and_sharding_works(tmp_path, tiny_config):
    state = _state()
    summary = save_state_dict(state, tiny_config, tmp_path / "ck", weight_format="unquantized",
                              max_shard_bytes=20_000)
    assert summary["files"] > 1
    assert (tmp_path / "ck" / "model.safetensors.index.json").is_file()
    loaded = load_state_dict(tmp_path / "ck", _expected(state))
    assert all(torch.equal(loaded[k], v) for k, v in state.items())


def _header(path):
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n])


def _rewrite_header(path, edit):
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    edit(header)
    new = json.dumps(header).encode()
    new += b" " * ((8 - len(new) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(new)) + new + raw[8 + n:])


@pytest.fixture
def saved(tmp_path, tiny_config):
    state = _state()
    save_state_dict(state, tiny_config, tmp_path / "ck")
    return tmp_path / "ck", _expected(state)


def _one_line_error(directory, expected, match):
    with pytest.raises(CheckpointError, match=match) as info:
        load_state_dict(directory, expected)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_truncated_file(saved):
    directory, expected = saved
    path = directory / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-100])
    msg = _one_line_error(directory, expected, "truncated: tensor")
    assert "model.safetensors" in msg
    path.write_bytes(b"\x10\x00")
    _one_line_error(directory, expected, "truncated")


def test_missing_tensor(saved):
    directory, expected = saved
    expected = {**expected, "layers.5.attn.wkv.weight": ((128, 256), torch.float32)}
    _one_line_error(directory, expected, r"missing tensor layers\.5\.attn\.wkv\.weight")


def test_misshaped_tensor(saved):
    directory, expected = saved
    expected = {**expected, "norm.weight": ((65,), torch.float32)}
    _one_line_error(directory, expected, r"tensor norm\.weight: shape \[64\], expected \[65\]")
    expected = {**_expected(_state()), "layers.0.attn.wq_a.weight": ((64, 96), torch.float32)}
    _one_line_error(directory, expected, r"layers\.0\.attn\.wq_a\.weight: shape \[64, 64\], expected \[64, 96\]")


def test_misshaped_scale(saved):
    directory, expected = saved

    def edit(h):
        e = h["layers.0.attn.wq_a.scale"]
        e["shape"] = [4, 1]
    _rewrite_header(directory / "model.safetensors", edit)
    _one_line_error(directory, expected, r"layers\.0\.attn\.wq_a\.scale: shape \[4, 1\], expected \[2, 2\]")


def test_unknown_dtype(saved):
    directory, expected = saved
    _rewrite_header(directory / "model.safetensors",
                    lambda h: h["norm.weight"].update(dtype="F64"))
    _one_line_error(directory, expected, r"tensor norm\.weight: unknown dtype 'F64'")


def test_unexpected_tensor(saved):
    directory, expected = saved
    expected = dict(expected)
    del expected["norm.weight"]
    _one_line_error(directory, expected, r"unexpected tensor norm\.weight")


@pytest.mark.parametrize("text, match", [
    ("{not json", "not valid JSON"),
    (json.dumps({"architectures": ["x"]}), "nested text_config"),
    (json.dumps({"text_config": {"hidden_size": "big"}}), "hidden_size"),
])
def test_malformed_config(saved, text, match):
    directory, _ = saved
    (directory / "config.json").write_text(text)
    with pytest.raises(CheckpointError, match=match) as info:
        read_config(directory)
    assert "config.json" in str(info.value) and "\n" not in str(info.value)


def test_not_a_directory(tmp_path):
    with pytest.raises(CheckpointError, match="not a checkpoint directory"):
        load_state_dict(tmp_path / "nope", {})
