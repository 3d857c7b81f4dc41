"""Engram's compressed-token map: token id -> compressed id, built from a tokenizer the
way the released DeepSeek-V4.1 builds it (docs/model.md §8).

Why it exists: Engram hashes n-grams over a smaller id space in which tokens that read
alike after normalisation (" The", "the" and "THE"; "café" and "cafe") share one id.
The hash multipliers are drawn for the size of that space (``runtime/engram.py``), so
the map has to be the release's exactly: a different numbering, or a different size,
looks every n-gram up in the wrong table row.

The rule, per token id 0 .. n-1 (n = the tokenizer's size with its added tokens):

1. text = the token decoded alone, special tokens kept;
2. if text holds U+FFFD (a byte token that is only part of a UTF-8 character), the key is
   the token's raw vocabulary string;
3. otherwise the key is text normalised by NFKC, NFD, accent stripping, lower-casing,
   every run of spaces/tabs/CR/LF made one space, then stripped of surrounding
   whitespace, except that a text which is exactly one space after the run rule stays
   one space; a text that normalises to nothing keeps its decoded form as the key;
4. keys are numbered in order of first appearance: that number is the compressed id.

The toolkit's own vocabularies (``tiny``, ``mid``, the testbed) are no larger than their
compressed vocabulary and use the identity map (compressed id = token id).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runtime.config import V41Config
from runtime.errors import ConfigError

REPLACEMENT_CHAR = "\ufffd"
# A private-use character stands in for a lone space while surrounding whitespace is
# stripped, so the one-space token keeps its own key instead of collapsing to "".
_SPACE_SENTINEL = "\ue000"


@dataclass(frozen=True, eq=False)
class CompressedTokenMap:
    """``ids[t]`` is token t's compressed id for every t < the model's vocabulary;
    ``size`` is the number of compressed ids (the hash multipliers' bound);
    ``source`` names where the map came from, for error messages."""

    ids: torch.Tensor  # int64 [vocab_size]
    size: int
    source: str


def release_normalizer():
    """The normaliser of rule 3, built from the ``tokenizers`` library's own pieces so
    the Unicode tables are the ones the release uses."""
    from tokenizers import Regex, normalizers

    return normalizers.Sequence([
        normalizers.NFKC(),
        normalizers.NFD(),
        normalizers.StripAccents(),
        normalizers.Lowercase(),
        normalizers.Replace(Regex(r"[ \t\r\n]+"), " "),
        normalizers.Replace(Regex(r"^ $"), _SPACE_SENTINEL),
        normalizers.Strip(),
        normalizers.Replace(_SPACE_SENTINEL, " "),
    ])


def token_keys(tokenizer) -> list[str]:
    """Rules 1-3 for every id of ``tokenizer`` (a ``tokenizers.Tokenizer``)."""
    normalizer = release_normalizer()
    keys = []
    for token_id in range(tokenizer.get_vocab_size(with_added_tokens=True)):
        text = tokenizer.decode([token_id], skip_special_tokens=False)
        if REPLACEMENT_CHAR in text:
            keys.append(tokenizer.id_to_token(token_id))
        else:
            keys.append(normalizer.normalize_str(text) or text)
    return keys


def number_keys(keys: list[str]) -> tuple[list[int], int]:
    """Rule 4: (compressed id per position, number of distinct keys)."""
    numbers: dict[str, int] = {}
    return [numbers.setdefault(key, len(numbers)) for key in keys], len(numbers)


def token_map_from_tokenizer(tokenizer, config: V41Config, source: str) -> CompressedTokenMap:
    """The release's map for ``config``'s vocabulary.

    The compressed size must equal ``engram_compressed_vocab_size`` (the release refuses
    a mismatch too: the multipliers would silently hash every n-gram elsewhere). Ids the
    model has but the tokenizer lacks (an embedding padded past the tokenizer) get the
    pad token's compressed id: the release leaves them undefined, and a random-weight
    model can sample them."""
    ids, size = number_keys(token_keys(tokenizer))
    if size != config.engram_compressed_vocab_size:
        raise ConfigError(
            f"{source}: the tokenizer's {len(ids)} tokens normalise to {size} compressed ids, "
            f"expected engram_compressed_vocab_size = {config.engram_compressed_vocab_size}"
        )
    if config.engram_pad_id >= len(ids):
        raise ConfigError(
            f"{source}: engram_pad_id {config.engram_pad_id} is not a token of the tokenizer "
            f"({len(ids)} tokens)"
        )
    ids = ids[: config.vocab_size]
    ids += [ids[config.engram_pad_id]] * (config.vocab_size - len(ids))
    return CompressedTokenMap(torch.tensor(ids, dtype=torch.int64), size, source)


def identity_token_map(config: V41Config) -> CompressedTokenMap:
    """Compressed id = token id: the toolkit's small vocabularies, which have no release
    tokenizer. Refused when the vocabulary does not fit the compressed one."""
    if config.vocab_size > config.engram_compressed_vocab_size:
        raise ConfigError(
            f"engram_compressed_vocab_size: {config.engram_compressed_vocab_size} is smaller than "
            f"vocab_size {config.vocab_size}, so Engram needs the compressed token map of the "
            "release tokenizer (a tokenizer.json beside the checkpoint's config.json)"
        )
    return CompressedTokenMap(torch.arange(config.vocab_size, dtype=torch.int64),
                              config.engram_compressed_vocab_size, "identity")


def case_fold_tokenizer(vocab_size: int, n_classes: int):
    """A stand-in for a release tokenizer where only its sizes matter (a random-weight
    model at the released vocabulary; tests): a word-level ``tokenizers.Tokenizer`` of
    ``vocab_size`` tokens that rule 3 folds onto ``n_classes`` compressed ids. The words
    are "w<j>" for every class j, then "W<j>" (which lower-cases onto "w<j>") for the first
    ``vocab_size - n_classes`` classes, so token t has compressed id t, or t - n_classes
    for the upper-case words."""
    from tokenizers import Tokenizer, models

    if not 0 < n_classes <= vocab_size <= 2 * n_classes:
        raise ConfigError(f"case-fold tokenizer: {vocab_size} tokens cannot fold onto {n_classes} "
                          "compressed ids (needs n_classes <= vocab_size <= 2 x n_classes)")
    words = [f"w{j}" for j in range(n_classes)] + [f"W{j}" for j in range(vocab_size - n_classes)]
    return Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="w0"))


def case_fold_token_map(config: V41Config) -> CompressedTokenMap:
    """The map of ``case_fold_tokenizer`` at ``config``'s sizes, built by the release rule
    (``token_map_from_tokenizer``): what a random-weight model whose vocabulary exceeds the
    compressed one (``flash``) hashes with, since it has no release tokenizer."""
    tokenizer = case_fold_tokenizer(config.vocab_size, config.engram_compressed_vocab_size)
    return token_map_from_tokenizer(tokenizer, config, "case-fold stand-in tokenizer")
