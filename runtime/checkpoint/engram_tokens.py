"""The Engram compressed-token map of a checkpoint folder, from its ``tokenizer.json``.

Why here: the map is part of the checkpoint (the release builds it from the tokenizer
that ships beside the weights), so the loader reads it with the weights and hangs it on
them (``V41Weights.engram_token_map``). ``tokenizer.json`` is a Hugging Face ``tokenizers``
file, read with that library (``runtime/tokenizer_file.py``, the reader the engine uses
too): the release's, or the toolkit's own byte tokenizer (``runtime/tokenizer_hf.py``,
written with every checkpoint the toolkit saves), whose layout is recognised and whose
small vocabularies use the identity map. Every problem is one ``CheckpointError`` line
naming the file and what was expected.
"""

from __future__ import annotations

from pathlib import Path

from runtime.config import V41Config
from runtime.engine.errors import TokenizerError
from runtime.engram_map import CompressedTokenMap, token_map_from_tokenizer
from runtime.errors import CheckpointError, ConfigError
from runtime.tokenizer_file import read_tokenizer_json
from runtime.tokenizer_hf import is_toolkit_layout

TOKENIZER_FILE = "tokenizer.json"


def read_engram_token_map(directory: Path, config: V41Config) -> CompressedTokenMap | None:
    """The map of ``directory``'s release tokenizer; None for the identity map (no
    Engram layers, or the toolkit's byte tokenizer / no tokenizer with a vocabulary that
    fits the compressed one)."""
    if not config.engram_layer_ids:
        return None
    path = directory / TOKENIZER_FILE
    needs_map = config.vocab_size > config.engram_compressed_vocab_size
    why = (f"vocab_size {config.vocab_size} > engram_compressed_vocab_size "
           f"{config.engram_compressed_vocab_size} needs the release tokenizer's compressed token map")
    if not path.is_file():
        if needs_map:
            raise CheckpointError(f"{path}: missing; {why}")
        return None
    try:
        tokenizer = read_tokenizer_json(path)
    except TokenizerError as exc:
        raise CheckpointError(str(exc)) from None
    if is_toolkit_layout(tokenizer):
        if needs_map:
            raise CheckpointError(f"{path}: the toolkit's byte tokenizer, not a release tokenizer; {why}")
        return None
    try:
        return token_map_from_tokenizer(tokenizer, config, str(path))
    except ConfigError as exc:
        raise CheckpointError(str(exc)) from None

