"""A checkpoint folder's tokenizer.json becomes the weights' Engram compressed-token map;
a missing, foreign or mismatched tokenizer is one line naming the file."""

from __future__ import annotations

import json

import pytest
import torch
from tokenizers import Tokenizer, models

from runtime.checkpoint import load_checkpoint, save_checkpoint
from runtime.checkpoint.engram_tokens import read_engram_token_map
from runtime.checkpoint.io import write_config
from runtime.config import V41Config
from runtime.errors import CheckpointError
from runtime.tokenizer import ByteTokenizer
from runtime.weights import V41Weights

N_CLASSES = 500


@pytest.fixture(scope="module")
def config():
    # tiny (vocabulary 512) with two experts and a compressed vocabulary smaller than it
    return V41Config.preset("tiny").replace(n_routed_experts=2, num_experts_per_tok=1,
                                            engram_compressed_vocab_size=N_CLASSES)


def tokenizer(vocab_size: int = 512) -> Tokenizer:
    """"t<j>" for 500 classes, then "T<j>" folding onto the first 12 of them."""
    words = [f"t{j}" for j in range(N_CLASSES)] + [f"T{j}" for j in range(vocab_size - N_CLASSES)]
    return Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="t0"))


def test_load_checkpoint_attaches_the_tokenizer_map(tmp_path, config):
    from runtime.model import V41Model

    weights = V41Weights.random(config, seed=1)
    save_checkpoint(weights, tmp_path, weight_format="unquantized")
    with pytest.raises(CheckpointError, match="tokenizer.json: missing; vocab_size 512 > "
                                              "engram_compressed_vocab_size 500"):
        load_checkpoint(tmp_path)
    tokenizer().save(str(tmp_path / "tokenizer.json"))
    _, loaded = load_checkpoint(tmp_path)
    expected = list(range(N_CLASSES)) + list(range(512 - N_CLASSES))
    assert loaded.engram_token_map.ids.tolist() == expected
    assert loaded.engram_token_map.size == N_CLASSES
    assert torch.equal(V41Model(loaded).hasher.token_ids, loaded.engram_token_map.ids)


def test_the_toolkit_byte_tokenizer_keeps_the_identity_map(tmp_path, config):
    fits = config.replace(engram_compressed_vocab_size=512)
    write_config(fits, tmp_path, "unquantized")
    ByteTokenizer(vocab_size=512).save(tmp_path / "tokenizer.json")
    assert read_engram_token_map(tmp_path, fits) is None
    with pytest.raises(CheckpointError, match="the toolkit's byte tokenizer, not a release tokenizer"):
        read_engram_token_map(tmp_path, config)


@pytest.mark.parametrize("text, match", [
    ("{not json", r"tokenizer\.json: not valid JSON \(Expecting property name"),
    (json.dumps({"vocab": ["a"]}), r"tokenizer\.json: not a tokenizers tokenizer\.json \("),
    (None, r"tokenizer\.json: the tokenizer's 520 tokens normalise to 500 compressed ids, "
           r"expected engram_compressed_vocab_size = 499"),
])
def test_a_bad_tokenizer_is_one_line_before_any_weights_are_read(tmp_path, config, text, match):
    cfg = config.replace(engram_compressed_vocab_size=499) if text is None else config
    write_config(cfg, tmp_path, "unquantized")  # no safetensors: the tokenizer is read first
    if text is None:
        tokenizer(520).save(str(tmp_path / "tokenizer.json"))
    else:
        (tmp_path / "tokenizer.json").write_text(text)
    with pytest.raises(CheckpointError, match=match) as info:
        load_checkpoint(tmp_path)
    assert "\n" not in str(info.value)


def test_every_saved_checkpoint_carries_a_tokenizer_the_engine_and_the_map_read(tmp_path, config):
    """save_checkpoint writes the byte tokenizer where it can serve the model (the map is
    then the identity), a given tokenizer as is, and none where only the release's fits."""
    from runtime.tokenizer_file import load_tokenizer

    fits = config.replace(engram_compressed_vocab_size=512)
    save_checkpoint(V41Weights.random(fits, seed=1), tmp_path / "fits", weight_format="unquantized")
    assert load_tokenizer(tmp_path / "fits" / "tokenizer.json").encode("7?") == [3 + 55, 3 + 63]
    assert load_checkpoint(tmp_path / "fits")[1].engram_token_map is None
    save_checkpoint(V41Weights.random(config, seed=1), tmp_path / "given", weight_format="unquantized",
                    tokenizer=tokenizer())
    assert load_checkpoint(tmp_path / "given")[1].engram_token_map.size == N_CLASSES
    save_checkpoint(V41Weights.random(config, seed=1), tmp_path / "none", weight_format="unquantized")
    assert not (tmp_path / "none" / "tokenizer.json").exists()
