"""A small, deterministic, offline byte-level tokenizer: the *test* tokenizer.

Why it exists: random-weight models (``tiny``, ``mid``) still need text in and text out
so that tasks, stop strings and reports run end to end without any download. Real
DeepSeek-V4.1 checkpoints are served by vLLM with their own tokenizer; this one is
never meant to reproduce it.

Layout of the id space (``vocab_size`` defaults to 512, the ``tiny`` vocabulary):

- ``0 .. len(specials)-1``: special tokens (``<|bos|>`` = 0, ``<|eos|>`` = 1,
  ``<|pad|>`` = 2 by default; pad 2 matches V4.1's Engram pad id);
- the next 256 ids: one per byte value, so every string round-trips;
- the rest: optional byte-pair merges, learned deterministically by
  :func:`train_merges` (most frequent pair first, ties broken by the smaller pair of
  ids) and applied in rank order inside pre-tokens (a word with its leading space, a
  run of digits, a run of other symbols), like GPT-2 style byte BPE.
"""

from __future__ import annotations

import codecs
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from runtime.engine.errors import TokenizerError

DEFAULT_SPECIALS = ("<|bos|>", "<|eos|>", "<|pad|>")
N_BYTES = 256
FORMAT_NAME = "v41val-byte-bpe"

# A word with an optional leading space, a run of digits, a run of other visible
# symbols, or a run of whitespace. Merges never cross these pieces.
PRETOKEN_PATTERN = r" ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+|_+"
_PRETOKEN = re.compile(PRETOKEN_PATTERN, re.UNICODE)


def _pretokens(text: str) -> list[bytes]:
    pieces = _PRETOKEN.findall(text)
    # The pattern covers every character; assert it so a silent drop is impossible.
    if sum(len(p) for p in pieces) != len(text):  # pragma: no cover - defensive
        raise TokenizerError("internal: pre-tokenizer dropped characters")
    return [p.encode("utf-8") for p in pieces]


class SpecialIds:
    """What every tokenizer of the toolkit derives from its ``special_id`` and
    ``token_bytes``: the named special ids and an incremental decoder."""

    def special_id(self, name: str) -> int:  # pragma: no cover - each tokenizer has its own
        raise NotImplementedError

    @property
    def bos_id(self) -> int:
        return self.special_id("<|bos|>")

    @property
    def eos_id(self) -> int:
        return self.special_id("<|eos|>")

    @property
    def pad_id(self) -> int:
        return self.special_id("<|pad|>")

    def incremental_decoder(self) -> IncrementalDetokenizer:
        return IncrementalDetokenizer(self)


@dataclass(frozen=True)
class ByteTokenizer(SpecialIds):
    """Specials + 256 byte ids + ranked merges, all inside ``vocab_size``."""

    vocab_size: int = 512
    specials: tuple[str, ...] = DEFAULT_SPECIALS
    merges: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        need = len(self.specials) + N_BYTES + len(self.merges)
        if need > self.vocab_size:
            raise TokenizerError(
                f"tokenizer needs {need} ids ({len(self.specials)} specials + 256 bytes + "
                f"{len(self.merges)} merges) but vocab_size is {self.vocab_size}"
            )
        if len(set(self.specials)) != len(self.specials):
            raise TokenizerError("tokenizer specials must be distinct")
        ranks = {}
        for rank, (a, b) in enumerate(self.merges):
            new_id = self.byte_offset + N_BYTES + rank
            for part in (a, b):
                if not (self.byte_offset <= part < new_id):
                    raise TokenizerError(
                        f"merge {rank} ({a}, {b}) refers to id {part}, expected a byte or an "
                        f"earlier merge in [{self.byte_offset}, {new_id})"
                    )
            if (a, b) in ranks:
                raise TokenizerError(f"merge {rank} ({a}, {b}) repeats an earlier merge")
            ranks[(a, b)] = rank

    # ---- id space -----------------------------------------------------------------
    @property
    def byte_offset(self) -> int:
        return len(self.specials)

    @property
    def n_used(self) -> int:
        """Ids in use; ids in [n_used, vocab_size) decode to nothing."""
        return self.byte_offset + N_BYTES + len(self.merges)

    def special_text(self, token_id: int) -> str | None:
        """The special token's string, None for any other id."""
        return self.specials[token_id] if 0 <= token_id < self.byte_offset else None

    def special_id(self, name: str) -> int:
        try:
            return self.specials.index(name)
        except ValueError:
            raise TokenizerError(f"unknown special token {name!r}") from None

    # ---- encode ---------------------------------------------------------------------
    def encode(self, text: str, *, add_bos: bool = False, allow_special: bool = False) -> list[int]:
        """Text -> ids. With ``allow_special`` literal special strings become their ids."""
        ids: list[int] = [self.bos_id] if add_bos else []
        if allow_special and self.specials:
            pattern = "(" + "|".join(re.escape(s) for s in self.specials) + ")"
            parts = re.split(pattern, text)
        else:
            parts = [text]
        for part in parts:
            if allow_special and part in self.specials:
                ids.append(self.specials.index(part))
                continue
            for piece in _pretokens(part):
                ids.extend(self._encode_piece(piece))
        return ids

    def _encode_piece(self, piece: bytes) -> tuple[int, ...]:
        return _bpe(piece, self.byte_offset, self.merges)

    # ---- decode ---------------------------------------------------------------------
    def token_bytes(self, token_id: int) -> bytes:
        """The bytes one id stands for (specials give b"")."""
        if not (0 <= token_id < self.vocab_size):
            raise TokenizerError(f"token id {token_id} is outside the vocabulary [0, {self.vocab_size})")
        if token_id < self.byte_offset:
            return b""
        if token_id < self.byte_offset + N_BYTES:
            return bytes([token_id - self.byte_offset])
        rank = token_id - self.byte_offset - N_BYTES
        if rank >= len(self.merges):
            return b""
        return _merge_bytes(self.byte_offset, self.merges, rank)

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        return b"".join(self.token_bytes(int(i)) for i in ids)

    def decode(self, ids: Iterable[int], *, skip_special: bool = True) -> str:
        """Ids -> text. Invalid UTF-8 (a cut multi-byte character) becomes U+FFFD."""
        out: list[str] = []
        buf: list[int] = []
        for raw in ids:
            i = int(raw)
            if i < self.byte_offset:
                self.token_bytes(i)  # range check
                if not skip_special:
                    out.append(b"".join(self.token_bytes(j) for j in buf).decode("utf-8", "replace"))
                    buf = []
                    out.append(self.specials[i])
                continue
            buf.append(i)
        out.append(self.decode_bytes(buf).decode("utf-8", "replace"))
        return "".join(out)

    # ---- files ----------------------------------------------------------------------
    def to_hf(self):
        """This tokenizer as a Hugging Face ``tokenizers.Tokenizer`` (same ids)."""
        from runtime.tokenizer_hf import to_hf

        return to_hf(self)

    def save(self, path: str | Path) -> None:
        """Write ``tokenizer.json`` in the ``tokenizers`` format (``runtime/tokenizer_hf.py``);
        ``runtime.tokenizer_file.load_tokenizer`` reads it back."""
        self.to_hf().save(str(path), pretty=False)

    @classmethod
    def trained(cls, texts: Iterable[str], vocab_size: int = 512,
                specials: tuple[str, ...] = DEFAULT_SPECIALS) -> ByteTokenizer:
        """A tokenizer whose merges are learned from ``texts`` (deterministic)."""
        n_merges = vocab_size - len(specials) - N_BYTES
        if n_merges < 0:
            raise TokenizerError(f"vocab_size {vocab_size} is too small for 256 bytes + specials")
        merges = train_merges(texts, n_merges, byte_offset=len(specials))
        return cls(vocab_size=vocab_size, specials=specials, merges=merges)


class IncrementalDetokenizer:
    """Text of a growing id sequence, without spurious U+FFFD for a character whose
    bytes are still arriving. Used by the engine for stop strings."""

    def __init__(self, tokenizer: ByteTokenizer) -> None:
        self._tokenizer = tokenizer
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.text = ""

    def push(self, token_id: int) -> str:
        """Append one id; return the text that became final with it."""
        new = self._decoder.decode(self._tokenizer.token_bytes(int(token_id)))
        self.text += new
        return new

    def flush(self) -> str:
        new = self._decoder.decode(b"", final=True)
        self.text += new
        return new


@lru_cache(maxsize=4096)
def _merge_bytes(byte_offset: int, merges: tuple[tuple[int, int], ...], rank: int) -> bytes:
    def part(i: int) -> bytes:
        if i < byte_offset + N_BYTES:
            return bytes([i - byte_offset])
        return _merge_bytes(byte_offset, merges, i - byte_offset - N_BYTES)

    a, b = merges[rank]
    return part(a) + part(b)


@lru_cache(maxsize=65536)
def _bpe(piece: bytes, byte_offset: int, merges: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
    """Apply ranked merges to one pre-token: always merge the lowest-rank adjacent pair."""
    ids = [byte_offset + b for b in piece]
    if not merges or len(ids) < 2:
        return tuple(ids)
    ranks = _ranks_of(merges)
    first_merge_id = byte_offset + N_BYTES
    while len(ids) >= 2:
        best_rank, best_at = None, -1
        for k in range(len(ids) - 1):
            r = ranks.get((ids[k], ids[k + 1]))
            if r is not None and (best_rank is None or r < best_rank):
                best_rank, best_at = r, k
        if best_rank is None:
            break
        pair = (ids[best_at], ids[best_at + 1])
        merged, k = [], 0
        while k < len(ids):
            if k + 1 < len(ids) and (ids[k], ids[k + 1]) == pair:
                merged.append(first_merge_id + best_rank)
                k += 2
            else:
                merged.append(ids[k])
                k += 1
        ids = merged
    return tuple(ids)


@lru_cache(maxsize=64)
def _ranks_of(merges: tuple[tuple[int, int], ...]) -> dict:
    return {pair: rank for rank, pair in enumerate(merges)}


def train_merges(texts: Iterable[str], n_merges: int, *, byte_offset: int = len(DEFAULT_SPECIALS)
                 ) -> tuple[tuple[int, int], ...]:
    """Learn up to ``n_merges`` byte-pair merges from ``texts``.

    Deterministic: each round merges the most frequent adjacent pair within
    pre-tokens; ties go to the numerically smallest ``(left, right)`` pair.
    """
    words: Counter = Counter()
    for text in texts:
        words.update(_pretokens(text))
    seqs = {w: [byte_offset + b for b in w] for w in words}
    merges: list[tuple[int, int]] = []
    for rank in range(n_merges):
        pairs: Counter = Counter()
        for w, ids in seqs.items():
            for k in range(len(ids) - 1):
                pairs[(ids[k], ids[k + 1])] += words[w]
        if not pairs:
            break
        best = min(pairs.items(), key=lambda item: (-item[1], item[0]))
        if best[1] < 2:
            break
        pair, new_id = best[0], byte_offset + N_BYTES + rank
        merges.append(pair)
        for w, ids in seqs.items():
            out, k = [], 0
            while k < len(ids):
                if k + 1 < len(ids) and (ids[k], ids[k + 1]) == pair:
                    out.append(new_id)
                    k += 2
                else:
                    out.append(ids[k])
                    k += 1
            seqs[w] = out
    return tuple(merges)


def check_ids(ids: Sequence[int], vocab_size: int) -> None:
    """Raise a one-line TokenizerError for an id outside ``[0, vocab_size)``."""
    for pos, i in enumerate(ids):
        if not (0 <= int(i) < vocab_size):
            raise TokenizerError(f"token id {int(i)} at position {pos} is outside [0, {vocab_size})")
