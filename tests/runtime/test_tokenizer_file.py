"""tokenizer.json as a Hugging Face ``tokenizers`` file: the shipped testbed's ids are the
ids the checkpoint was trained on, the file is an ordinary tokenizers file, and a bad
file is one line naming it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models

from runtime import testbed
from runtime.engine.errors import TokenizerError
from runtime.tokenizer import ByteTokenizer
from runtime.tokenizer_file import FileTokenizer, load_tokenizer
from tasks.gsm8k_data import load_gsm8k_test

OLD_FILE = Path(__file__).resolve().parents[1] / "fixtures" / "testbed_tokenizer_v1.json"


def old_testbed_tokenizer() -> ByteTokenizer:
    """The shipped tokenizer as the pre-tokenizers format described it (the old path)."""
    data = json.loads(OLD_FILE.read_text())
    assert data["type"] == "v41val-byte-bpe"
    return ByteTokenizer(vocab_size=data["vocab_size"], specials=tuple(data["specials"]),
                         merges=tuple(tuple(m) for m in data["merges"]))


def corpus() -> list[str]:
    questions = [q for q, _ in load_gsm8k_test()[:200]]
    every_char = "".join(chr(c) for c in range(1, 0x800)) + "".join(
        chr(c) for c in range(0x800, 0x11000, 97) if not 0xD800 <= c < 0xE000)
    return questions + [
        "", "Hello, world!", "naïve café — ünïcödé ✓ 日本語 🙂 e\u0301", "tabs\tand  double  spaces\r\n",
        "<|eos|> looks special <|bos|><|pad|>", every_char, "\x00\x7f",
    ]


@pytest.fixture(scope="module")
def new():
    return load_tokenizer(testbed.testbed_dir() / "tokenizer.json", vocab_size=512)


def test_the_shipped_file_encodes_to_the_ids_the_testbed_was_trained_on(new):
    old = old_testbed_tokenizer()
    for text in corpus():
        ids = new.encode(text)
        assert ids == old.encode(text) == [3 + b for b in text.encode("utf-8")]
        assert new.decode(ids) == old.decode(ids) == text
        assert new.encode(text, allow_special=True) == old.encode(text, allow_special=True)
        assert new.encode(text, add_bos=True) == [0, *ids]
    assert new.encode("<|eos|>x", allow_special=True) == [1, 3 + ord("x")]
    assert (new.bos_id, new.eos_id, new.pad_id, new.vocab_size) == (0, 1, 2, 512)


def test_any_id_sequence_decodes_as_before(new):
    """Random ids (cut UTF-8 characters, lone continuation bytes, specials, the unused ids
    past the file): the file's decoder and the old byte join give the same text and
    the same bytes."""
    old, rng = old_testbed_tokenizer(), random.Random(7)
    for token_id in range(512):
        assert new.token_bytes(token_id) == old.token_bytes(token_id)
    for _ in range(3000):
        ids = [rng.randrange(512) for _ in range(rng.randrange(1, 10))]
        assert new.decode(ids) == old.decode(ids), ids
        assert new.decode(ids, skip_special=False) == old.decode(ids, skip_special=False)
    dec, text = new.incremental_decoder(), "é!"
    assert [dec.push(i) for i in new.encode(text)] == ["", "é", "!"]


def test_the_file_is_a_plain_tokenizers_file_with_one_string_per_id():
    raw = Tokenizer.from_file(str(testbed.testbed_dir() / "tokenizer.json"))
    strings = [raw.id_to_token(i) for i in range(raw.get_vocab_size(with_added_tokens=True))]
    assert len(strings) == 259 and len(set(strings)) == 259  # the ids past 259 are unused
    specials = {i: t.content for i, t in raw.get_added_tokens_decoder().items() if t.special}
    assert specials == {0: "<|bos|>", 1: "<|eos|>", 2: "<|pad|>"}
    assert raw.encode("<|pad|> A", add_special_tokens=False).ids == [2, 3 + 32, 3 + 65]
    assert raw.decode([3 + 0xE6, 3 + 0x97, 3 + 0xA5, 1]) == "日"
    assert load_tokenizer(testbed.testbed_dir() / "tokenizer.json").vocab_size == 259


def test_merges_keep_their_ids_through_the_file(tmp_path):
    texts = ["The quick brown fox jumps over the lazy dog. Question: what is 3 + 4? Answer: 7.\n"] * 5
    old = ByteTokenizer.trained(texts, vocab_size=512)
    assert len(old.merges) > 40
    old.save(tmp_path / "tokenizer.json")
    new = load_tokenizer(tmp_path / "tokenizer.json", vocab_size=512)
    for text in [*texts, "the brown dog jumps 3 + 4 = 7?", "quickly, lazily: 33 44"]:
        assert new.encode(text) == old.encode(text)
        assert new.decode(new.encode(text)) == text
    for token_id in range(512):
        assert new.token_bytes(token_id) == old.token_bytes(token_id)


def test_two_merges_spelling_the_same_bytes_are_refused():
    # (a, b) then (ab, c) and (a, bc) after (b, c): "abc" twice
    a, b, c = (3 + ord(x) for x in "abc")
    tok = ByteTokenizer(merges=((a, b), (b, c), (259, c), (a, 260)))
    with pytest.raises(TokenizerError, match=r"merge 3 \(100, 260\) spells the same bytes as id 261"):
        tok.to_hf()


@pytest.mark.parametrize("content, match", [
    ("{not json", r"tok\.json: not valid JSON \(Expecting property name .*expected a Hugging Face"),
    (OLD_FILE.read_text(), r"tok\.json: the toolkit's old 'v41val-byte-bpe' format; expected a Hugging"),
    (json.dumps({"vocab": ["a"]}), r"tok\.json: not a tokenizers tokenizer\.json \("),
    (b"\xff\xfe", r"tok\.json: cannot read tokenizer: expected a Hugging Face tokenizers"),
    (None, r"tok\.json: token 1 '日本' is not in the byte-level alphabet; expected a byte-level"),
])
def test_a_malformed_file_is_one_line_naming_it(tmp_path, content, match):
    path = tmp_path / "tok.json"
    if content is None:
        Tokenizer(models.WordLevel({"hi": 0, "日本": 1}, unk_token="hi")).save(str(path))
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(TokenizerError, match=match) as info:
        load_tokenizer(path)
    assert "\n" not in str(info.value)


def test_the_preset_tokenizer_is_the_file_tokenizer():
    from validate.engines.builtin_source import ModelSource

    tok = ModelSource(preset="tiny").tokenizer()
    assert isinstance(tok, FileTokenizer)
    assert tok.encode("ok?") == [3 + b for b in b"ok?"]
