"""The test tokenizer: round trips, hand-computed merges, errors."""

from __future__ import annotations

import pytest

from runtime.engine.errors import TokenizerError
from runtime.tokenizer import ByteTokenizer, train_merges

SAMPLES = [
    "",
    "Hello, world!",
    "Question: Janet has 16 ducks. 3 + 4 = 7\n\nAnswer:",
    "naïve café — ünïcödé ✓ 日本語 🙂",
    "tabs\tand  double  spaces\r\n",
    "<|eos|> looks special but is text",
]


def test_bytes_only_round_trip_and_ids():
    tok = ByteTokenizer()
    for text in SAMPLES:
        ids = tok.encode(text)
        assert tok.decode(ids) == text
        # Without merges every id is byte + 3 (three specials first).
        assert ids == [b + 3 for b in text.encode("utf-8")]


def test_specials_only_with_allow_special():
    tok = ByteTokenizer()
    assert tok.encode("<|eos|>")[0] == 3 + ord("<")
    assert tok.encode("a<|eos|>", allow_special=True) == [3 + ord("a"), 1]
    assert tok.decode([0, 3 + ord("x"), 1]) == "x"
    assert tok.decode([0, 3 + ord("x"), 1], skip_special=False) == "<|bos|>x<|eos|>"
    assert tok.encode("x", add_bos=True) == [0, 3 + ord("x")]


def test_training_matches_a_hand_computed_example():
    # "aaab": bytes a=100, b=101 (offset 3). Pair counts: (100,100)=2, (100,101)=1.
    # Round 1 merges (100,100) -> 259, giving [259, 100, 101]; then every pair occurs
    # once, below the minimum count of 2, so training stops.
    assert train_merges(["aaab"], 10) == ((100, 100),)
    tok = ByteTokenizer(merges=((100, 100),))
    assert tok.encode("aaab") == [259, 100, 101]
    assert tok.encode("aaaa") == [259, 259]
    assert tok.decode([259, 100, 101]) == "aaab"


def test_trained_tokenizer_round_trips_and_leaves_no_mergeable_pair():
    corpus = [s * 3 for s in SAMPLES] + ["the cat sat on the mat " * 20]
    tok = ByteTokenizer.trained(corpus, vocab_size=512)
    assert len(tok.merges) > 10
    merge_pairs = set(tok.merges)
    for text in SAMPLES + ["the cat sat on the mat"]:
        ids = tok.encode(text)
        assert tok.decode(ids) == text
        assert len(ids) <= len(text.encode("utf-8"))
    # Independent property of ranked BPE: inside one word no adjacent pair is still a merge.
    for word in ["the", " cat", " mat", " sat"]:
        ids = tok.encode(word)
        assert not any((a, b) in merge_pairs for a, b in zip(ids[:-1], ids[1:], strict=True))
    assert tok.encode("the cat sat on the mat") != ByteTokenizer().encode("the cat sat on the mat")
    # Deterministic: training twice gives the same merges.
    assert ByteTokenizer.trained(corpus, vocab_size=512).merges == tok.merges


def test_incremental_decoder_waits_for_whole_characters():
    tok = ByteTokenizer()
    ids = tok.encode("é!")  # 0xC3 0xA9 0x21
    dec = tok.incremental_decoder()
    assert dec.push(ids[0]) == ""
    assert dec.push(ids[1]) == "é"
    assert dec.push(ids[2]) == "!"
    assert dec.text == "é!"


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: ByteTokenizer(vocab_size=200), "vocab_size is 200"),
        (lambda: ByteTokenizer(merges=((3, 999),)), "merge 0"),
        (lambda: ByteTokenizer().decode([512]), "token id 512"),
        (lambda: ByteTokenizer().decode([-1]), "token id -1"),
    ],
)
def test_bad_input_is_one_line_error(make, match):
    with pytest.raises(TokenizerError, match=match) as info:
        make()
    assert "\n" not in str(info.value)
