"""Checkpoints of a whole model: ``V41Weights`` <-> a checkpoint directory."""

from __future__ import annotations

from pathlib import Path

import torch

from runtime.checkpoint.codec import check_weight_format
from runtime.checkpoint.engram_tokens import TOKENIZER_FILE
from runtime.checkpoint.io import load_state_dict, output_directory, read_config, save_state_dict
from runtime.config import V41Config
from runtime.seeds import check_seed


def _expected(weights) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    return {name: (tuple(t.shape), t.dtype) for name, t in weights.state_dict().items()}


def save_checkpoint(weights, directory: str | Path, weight_format: str = "release",
                    config: V41Config | None = None, tokenizer=None) -> dict:
    """Write ``weights`` (a ``V41Weights``), its config and its ``tokenizer.json`` to
    ``directory``.

    ``tokenizer``: anything with ``save(path)`` that writes a ``tokenizers`` file (a
    ``tokenizers.Tokenizer``, the toolkit's ``ByteTokenizer``). Left out, the folder gets
    the toolkit's byte tokenizer whenever it can serve the model: the vocabulary has room
    for its specials and 256 bytes, and Engram needs no release map (whose tokenizer only
    the caller can supply), so every folder the toolkit writes can be served and scored."""
    config = config if config is not None else weights.config
    summary = save_state_dict(weights.state_dict(), config, directory, weight_format)
    if tokenizer is None and _byte_tokenizer_fits(config):
        from runtime.tokenizer import ByteTokenizer

        tokenizer = ByteTokenizer(vocab_size=config.vocab_size)
    if tokenizer is not None:
        tokenizer.save(str(Path(directory) / TOKENIZER_FILE))
    return summary


def _byte_tokenizer_fits(config: V41Config) -> bool:
    from runtime.tokenizer import DEFAULT_SPECIALS, N_BYTES

    needs_map = bool(config.engram_layer_ids) and (
        config.vocab_size > config.engram_compressed_vocab_size)
    return config.vocab_size >= len(DEFAULT_SPECIALS) + N_BYTES and not needs_map


def load_checkpoint(directory: str | Path, dtype: torch.dtype | None = None,
                    device: str | torch.device | None = None):
    """(config, V41Weights) from a checkpoint directory; quantised weights are dequantised.
    The weights carry the Engram compressed-token map of the folder's tokenizer.json."""
    from runtime.checkpoint.engram_tokens import read_engram_token_map
    from runtime.weights import V41Weights

    root = Path(directory)
    config = read_config(root)
    token_map = read_engram_token_map(root, config)  # before the weights: fail fast
    # dtype overrides the model dtype only; mHC/sink/bias tensors stay float32 (V41Weights)
    weights = V41Weights(config, dtype=dtype, device=device)
    tensors = load_state_dict(root, _expected(weights))
    weights.load_state_dict(tensors, strict=True)
    weights.engram_token_map = token_map
    return config, weights


def load_weights(directory: str | Path, dtype: torch.dtype | None = None,
                 device: str | torch.device | None = None):
    return load_checkpoint(directory, dtype=dtype, device=device)[1]


def init_random_checkpoint(directory: str | Path, preset: str = "tiny", seed: int = 0,
                           weight_format: str = "release") -> dict:
    """Write a random-weight checkpoint of ``preset`` (plus the test tokenizer when the
    vocabulary has room for it, ``save_checkpoint``)."""
    from runtime.weights import V41Weights

    check_seed(seed, "seed")
    config = V41Config.preset(preset)
    check_weight_format(weight_format)
    output_directory(directory)  # a bad path fails before the weights are drawn
    weights = V41Weights.random(config, seed)
    summary = save_checkpoint(weights, directory, weight_format, config=config)
    return {**summary, "preset": preset, "seed": seed}
