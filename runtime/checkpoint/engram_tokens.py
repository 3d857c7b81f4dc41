"""The Engram compressed-token map of a checkpoint folder, from its ``tokenizer.json``.

Why here: the map is part of the checkpoint (the release builds it from the tokenizer
that ships beside the weights), so the loader reads it with the weights and hangs it on
them (``V41Weights.engram_token_map``). ``tokenizer.json`` is either a Hugging Face
``tokenizers`` file (the release's; read with that library) or the toolkit's own byte
tokenizer (``runtime/tokenizer.py``, written by ``init-checkpoint``), whose small
vocabularies use the identity map. Every problem is one ``CheckpointError`` line
naming the file and what was expected.
"""

from __future__ import annotations

import json
from pathlib import Path

from runtime.config import V41Config
from runtime.engram_map import CompressedTokenMap, token_map_from_tokenizer
from runtime.errors import CheckpointError, ConfigError
from runtime.tokenizer import FORMAT_NAME as BYTE_TOKENIZER_FORMAT

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
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: cannot read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if isinstance(data, dict) and data.get("type") == BYTE_TOKENIZER_FORMAT:
        if needs_map:
            raise CheckpointError(f"{path}: the toolkit's byte tokenizer, not a tokenizers file; {why}")
        return None
    tokenizer = _parse(path, text)
    try:
        return token_map_from_tokenizer(tokenizer, config, str(path))
    except ConfigError as exc:
        raise CheckpointError(str(exc)) from None


def _parse(path: Path, text: str):
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_str(text)
    except Exception as exc:  # the Rust side raises a bare Exception with its parse error
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CheckpointError(f"{path}: not a tokenizers tokenizer.json ({first})") from None
