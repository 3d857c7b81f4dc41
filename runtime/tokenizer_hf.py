"""The toolkit's byte tokenizer written as a Hugging Face ``tokenizers`` file.

Why: ``tokenizer.json`` in the ``tokenizers`` format is what the ecosystem reads
(transformers, vLLM, lm-eval's remote tokenizer, the release's Engram map), so the
toolkit's byte-level tokenizer (``runtime/tokenizer.py``) is saved as one, built with the
library itself, with every id kept where the in-memory tokenizer puts it (the shipped
testbed was trained on these ids):

- ids ``0 .. k-1``: the specials, declared as special added tokens (so ``"<|eos|>"`` in a
  prompt can map to id 1, and decoding skips them);
- the next 256 ids: one per byte value, spelled in the byte-level alphabet (GPT-2's
  printable stand-ins, :func:`byte_level_chars`), so distinct ids have distinct strings;
- then one id per merge (the concatenated strings, with the merge pair in rank order).

Ids the model's vocabulary has past those (nothing uses them) are not in the file, as a
release embedding padded past its tokenizer: the reader takes the model's size and
gives them no bytes (``runtime/tokenizer_file.py``). Declaring them as ``<|reserved_N|>``
added tokens would make a 129,280-id ``mid`` file 20 MB and seconds to read.

Pre-tokenization splits on the same pattern as the in-memory tokenizer, with the
library's Unicode classes: with no merges (the testbed) ids are the bytes whatever the
split; with merges, a combining mark or a superscript digit can fall into a different
piece than Python's ``re`` puts it.
"""

from __future__ import annotations

from functools import lru_cache

from runtime.engine.errors import TokenizerError


@lru_cache(maxsize=1)
def byte_level_chars() -> tuple[str, ...]:
    """Byte value -> its character in the byte-level alphabet: printable Latin-1 bytes
    stand for themselves, the other 68 take code points from 256 up, in byte order."""
    printable = {*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)}
    chars, extra = [], 0
    for value in range(256):
        if value in printable:
            chars.append(chr(value))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return tuple(chars)


def token_strings(tokenizer) -> list[str]:
    """The vocabulary string of every id ``tokenizer`` (a ``ByteTokenizer``) uses."""
    offset = tokenizer.byte_offset
    strings = list(tokenizer.specials) + list(byte_level_chars())
    seen = {s: i for i, s in enumerate(strings)}
    for rank, (a, b) in enumerate(tokenizer.merges):
        text = strings[a] + strings[b]
        if text in seen:
            raise TokenizerError(
                f"merge {rank} ({a}, {b}) spells the same bytes as id {seen[text]}; a tokenizer.json "
                "needs one string per id")
        seen[text] = offset + 256 + rank
        strings.append(text)
    return strings


def to_hf(tokenizer):
    """A ``tokenizers.Tokenizer`` with ``tokenizer``'s ids (see the module docstring)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    from runtime.tokenizer import PRETOKEN_PATTERN

    strings = token_strings(tokenizer)
    vocab = {s: i for i, s in enumerate(strings)}
    merges = [(strings[a], strings[b]) for a, b in tokenizer.merges]
    hf = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    hf.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKEN_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    hf.decoder = decoders.ByteLevel()
    # Already in the model's vocabulary, so the library keeps their ids.
    hf.add_special_tokens([AddedToken(s, special=True, normalized=False)
                           for s in tokenizer.specials])
    return hf


def is_toolkit_layout(hf) -> bool:
    """True when ``hf`` (a ``tokenizers.Tokenizer``) has the toolkit's layout: special
    added tokens first, then the 256 byte strings in byte order. Such a tokenizer is no
    release tokenizer: its small vocabularies use the identity Engram map."""
    added = hf.get_added_tokens_decoder()
    offset = 0
    while offset in added and added[offset].special:
        offset += 1
    if not offset:
        return False
    return all(hf.id_to_token(offset + value) == char
               for value, char in enumerate(byte_level_chars()))
