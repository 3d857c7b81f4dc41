"""A checkpoint folder's ``tokenizer.json``, read with Hugging Face ``tokenizers``.

Why: one reader for every place that takes a folder's tokenizer (the builtin engine,
``v41val serve`` and its ``/tokenize``, the lm-eval model, the Engram map), so the ids a
client counts, the ids the model sees and the ids the map is built from come from one
file. :class:`FileTokenizer` gives the engine what the in-memory ``ByteTokenizer`` gives
(encode, decode, the bytes of one id, the special ids), for any byte-level BPE file.
Every problem is one ``TokenizerError`` line naming the file and what was expected.
"""

from __future__ import annotations

import json
from pathlib import Path

from runtime.engine.errors import TokenizerError
from runtime.tokenizer import FORMAT_NAME, SpecialIds
from runtime.tokenizer_hf import byte_level_chars

EXPECTED = "expected a Hugging Face tokenizers tokenizer.json"


def read_tokenizer_json(path: str | Path):
    """``path`` as a ``tokenizers.Tokenizer`` (``Tokenizer.from_file``), or one line."""
    from tokenizers import Tokenizer

    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TokenizerError(f"{path}: cannot read tokenizer ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise TokenizerError(f"{path}: cannot read tokenizer: {EXPECTED} in UTF-8") from None
    except json.JSONDecodeError as exc:
        raise TokenizerError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); {EXPECTED}"
                             ) from None
    if isinstance(data, dict) and data.get("type") == FORMAT_NAME:
        raise TokenizerError(f"{path}: the toolkit's old {FORMAT_NAME!r} format; {EXPECTED} "
                             "(write one with runtime.tokenizer.ByteTokenizer(...).save)")
    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # the Rust side raises a bare Exception with its parse error
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TokenizerError(f"{path}: not a tokenizers tokenizer.json ({first})") from None


def load_tokenizer(path: str | Path, vocab_size: int | None = None) -> FileTokenizer:
    """``path`` for a model of ``vocab_size`` ids (None: the file's own size)."""
    return FileTokenizer(read_tokenizer_json(path), str(path), vocab_size)


class FileTokenizer(SpecialIds):
    """A byte-level ``tokenizers.Tokenizer`` behind the engine's tokenizer interface.

    ``vocab_size``: the model's; ids past the file's own size (an embedding padded past
    its tokenizer, the byte tokenizer's unused ids) are valid and stand for no bytes.
    Two copies of the file's tokenizer: one parses special-token strings into their ids,
    one (``encode_special_tokens``) reads them as text, so ``allow_special`` needs no
    shared switch that concurrent requests would race on."""

    def __init__(self, hf, source: str = "tokenizer.json", vocab_size: int | None = None) -> None:
        from tokenizers import Tokenizer

        self.source = source
        self._hf = hf
        self._literal = Tokenizer.from_str(hf.to_str())
        self._literal.encode_special_tokens = True
        self.file_size = hf.get_vocab_size(with_added_tokens=True)
        self.vocab_size = max(self.file_size, vocab_size or 0)
        added = hf.get_added_tokens_decoder()
        self._special = {i: t.content for i, t in added.items() if t.special}
        self._ids = {text: i for i, text in self._special.items()}
        self._bytes = self._byte_table(added)

    def _byte_table(self, added) -> list[bytes]:
        inverse = {c: b for b, c in enumerate(byte_level_chars())}
        table = []
        for token_id in range(self.file_size):
            token = self._hf.id_to_token(token_id)
            if token is None or token_id in self._special:
                table.append(b"")
            elif token_id in added:
                table.append(token.encode("utf-8"))
            else:
                try:
                    table.append(bytes(inverse[c] for c in token))
                except KeyError:
                    raise TokenizerError(
                        f"{self.source}: token {token_id} {token!r} is not in the byte-level "
                        "alphabet; expected a byte-level BPE tokenizer.json") from None
        return table + [b""] * (self.vocab_size - self.file_size)

    # ---- the special ids ------------------------------------------------------------
    def special_text(self, token_id: int) -> str | None:
        return self._special.get(int(token_id))

    def special_id(self, name: str) -> int:
        try:
            return self._ids[name]
        except KeyError:
            raise TokenizerError(f"{self.source}: no special token {name!r}") from None

    # ---- encode / decode ------------------------------------------------------------
    def encode(self, text: str, *, add_bos: bool = False, allow_special: bool = False) -> list[int]:
        """Text -> ids. With ``allow_special`` literal special strings become their ids."""
        hf = self._hf if allow_special else self._literal
        ids = hf.encode(text, add_special_tokens=False).ids
        return [self.bos_id, *ids] if add_bos else ids

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes one id stands for (specials give b"")."""
        if not (0 <= token_id < self.vocab_size):
            raise TokenizerError(f"token id {token_id} is outside the vocabulary [0, {self.vocab_size})")
        return self._bytes[token_id]

    def decode(self, ids, *, skip_special: bool = True) -> str:
        """Ids -> text through the file's decoder (invalid UTF-8 becomes U+FFFD)."""
        ids = [int(i) for i in ids]
        for i in ids:
            self.token_bytes(i)  # range check
        return self._hf.decode([i for i in ids if i < self.file_size],
                               skip_special_tokens=skip_special)
