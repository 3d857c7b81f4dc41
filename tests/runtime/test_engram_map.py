"""Engram's compressed-token map against hand-written classes and an independent
recompute of the release rule (Python's unicodedata, GPT-2 byte decoding), and the
``flash`` preset's Engram layers built with it (meta device, pure-Python hashes)."""

from __future__ import annotations

import re
import unicodedata

import numpy as np
import pytest
import sympy  # a dependency of torch: an independent source of primes
import torch
from tokenizers import AddedToken, Tokenizer, decoders, models

from runtime.config import V41Config
from runtime.engram import EngramHasher
from runtime.engram_map import (
    CompressedTokenMap,
    case_fold_token_map,
    case_fold_tokenizer,
    identity_token_map,
    number_keys,
    token_keys,
    token_map_from_tokenizer,
)
from runtime.errors import ConfigError
from runtime.weights import V41Weights, parameter_specs

# (token, the class it must fall in): written out by hand from the rule.
WORDS = [
    ("<unk>", 0),
    ("The", 1), (" the", 1), ("THE", 1),           # case and a leading space
    ("café", 2), ("cafe", 2),                      # accents stripped
    ("\ufb01", 3), ("fi", 3),                      # NFKC: the ligature is "fi"
    (" ", 4), ("\t", 4), ("  \n", 4),              # whitespace runs: one space, kept
    ("\u0301", 5),                                 # normalises to "": keeps its own text
    ("\uff34\uff48\uff45", 1),                     # fullwidth "The"
    (" x ", 6), ("x", 6), ("X\t", 6),              # surrounding whitespace stripped
    ("\u00e9", 7), ("e\u0301", 7), ("e", 7),       # composed, decomposed, plain
]
SPECIALS = [("<|BOS|>", 8), ("<|bos|>", 8)]       # added tokens: decoded, then normalised


def word_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.WordLevel({w: i for i, (w, _) in enumerate(WORDS)}, unk_token="<unk>"))
    tok.add_special_tokens([AddedToken(s, special=True) for s, _ in SPECIALS])
    return tok


def test_word_level_classes_written_by_hand():
    ids, size = number_keys(token_keys(word_tokenizer()))
    assert ids == [c for _, c in WORDS + SPECIALS]
    assert size == 9


def byte_alphabet() -> dict[int, str]:
    """GPT-2's byte -> printable character table, written from its definition: printable
    Latin-1 bytes stand for themselves, the other bytes take 256, 257, ... in order."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def reference_key(text: str, raw: str) -> str:
    """The release rule in Python's own Unicode functions (not the tokenizers library)."""
    if "\ufffd" in text:
        return raw
    s = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", text))
    s = "".join(ch for ch in s if not unicodedata.category(ch).startswith("M")).lower()
    s = re.sub(r"[ \t\r\n]+", " ", s)
    s = s if s == " " else s.strip(" \t\r\n")
    return s or text


def test_byte_level_map_equals_an_independent_recompute():
    alphabet = byte_alphabet()
    to_byte = {ch: b for b, ch in alphabet.items()}
    pieces = [" the", " The", "THE", "\u00e9", "E\u0301", "  ", "\t\n", "\ufb01", "fi", "caf\u00e9",
              " Caf\u00e9 ", "\u00c9", "\u4e2d", "\u4e2d\u6587"]
    vocab = [alphabet[b] for b in range(256)]
    vocab += ["".join(alphabet[b] for b in p.encode()) for p in pieces]
    vocab += ["".join(alphabet[b] for b in "\u4e2d".encode()[:2])]  # two bytes of three
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(vocab)}, merges=[]))
    tok.decoder = decoders.ByteLevel()
    keys = [reference_key(bytes(to_byte[ch] for ch in t).decode("utf-8", "replace"), t)
            for t in vocab]
    expected, expected_size = number_keys(keys)
    got, size = number_keys(token_keys(tok))
    assert got == expected and size == expected_size
    assert all(keys[b] == alphabet[b] for b in range(0x80, 0x100))  # partial bytes: raw keys
    assert got[256] == got[257] == got[258]          # " the", " The", "THE"
    assert got[259] == got[260] == got[ord("e")]     # é, E + combining acute, e
    assert got[256 + len(pieces)] != got[256 + pieces.index("\u4e2d")]  # partial vs whole


def test_map_for_a_config_checks_size_and_pads_missing_ids():
    tok = word_tokenizer()
    cfg = V41Config.preset("tiny").replace(engram_compressed_vocab_size=9)
    tmap = token_map_from_tokenizer(tok, cfg, "tok.json")
    assert tmap.size == 9 and tmap.ids.shape == (512,)
    n = len(WORDS) + len(SPECIALS)
    assert tmap.ids[:n].tolist() == [c for _, c in WORDS + SPECIALS]
    # ids past the tokenizer (a padded embedding) take the pad token's compressed id
    assert set(tmap.ids[n:].tolist()) == {WORDS[cfg.engram_pad_id][1]}
    with pytest.raises(ConfigError, match=r"tok\.json: .* 9 compressed ids, expected "
                                          r"engram_compressed_vocab_size = 10") as info:
        token_map_from_tokenizer(tok, cfg.replace(engram_compressed_vocab_size=10), "tok.json")
    assert "\n" not in str(info.value)


def test_hasher_hashes_compressed_ids_and_pads_with_the_compressed_pad():
    cfg = V41Config.preset("tiny").replace(engram_compressed_vocab_size=9)
    tmap = token_map_from_tokenizer(word_tokenizer(), cfg, "tok.json")
    hasher = EngramHasher(cfg, tmap)
    plain = EngramHasher(cfg.replace(vocab_size=9), identity_token_map(cfg.replace(vocab_size=9)))
    history = torch.tensor([1, 2, 3, 12, 4, 5, 19, 20, 16, 17, 18])
    positions = torch.arange(len(history))
    compressed = tmap.ids[history]
    assert hasher.pad_id == int(tmap.ids[cfg.engram_pad_id]) == 1  # token 2 is " the"
    # the identity hasher of the compressed vocabulary sees the compressed ids directly
    plain.pad_id = hasher.pad_id
    assert torch.equal(hasher(history, positions), plain(compressed, positions))
    # tokens of one class give one hash: "The the THE" and "THE The the" agree at the end
    a = hasher(torch.tensor([1, 2, 3]), torch.tensor([2]))
    b = hasher(torch.tensor([3, 1, 2]), torch.tensor([2]))
    assert torch.equal(a, b)


def test_batched_hashing_maps_tokens_like_the_per_request_hasher():
    from runtime.batched.engram import batch_hash_ids

    cfg = V41Config.preset("tiny").replace(engram_compressed_vocab_size=9)
    hasher = EngramHasher(cfg, token_map_from_tokenizer(word_tokenizer(), cfg, "tok.json"))
    tokens = torch.tensor([[1, 2, 3, 12, 4, 5, 19], [20, 16, 17, 18, 0, 3, 2]])
    batched = batch_hash_ids(hasher, tokens).reshape(2, 7, *hasher.offsets.shape)
    for row in range(2):
        assert torch.equal(batched[row], hasher(tokens[row], torch.arange(7)))


def test_identity_map_is_refused_past_the_compressed_vocabulary():
    flash = V41Config.preset("flash")
    with pytest.raises(ConfigError, match="engram_compressed_vocab_size: 99092 is smaller than "
                                          "vocab_size 129280") as info:
        EngramHasher(flash)
    assert "\n" not in str(info.value)
    wrong = CompressedTokenMap(torch.zeros(129280, dtype=torch.int64), 99091, "t.json")
    with pytest.raises(ConfigError, match=r"t\.json: .* 129280 tokens to 99091 ids, expected"):
        EngramHasher(flash, wrong)


def flash_primes(cfg: V41Config, k: int) -> list[list[int]]:
    """Bucket primes of engram layer k, from sympy: for every (layer, n-gram) the heads
    take the next primes above engram_vocab_size - 1 that no earlier head took."""
    taken: set[int] = set()
    for _ in range(k + 1):
        layer = []
        for _ in range(cfg.engram_max_ngram_size - 1):
            p, sizes = cfg.engram_vocab_size - 1, []
            for _ in range(cfg.engram_n_heads):
                p = sympy.nextprime(p)
                while p in taken:
                    p = sympy.nextprime(p)
                taken.add(p)
                sizes.append(p)
            layer.append(sizes)
    return layer


def flash_hash_ref(ids: list[int], pos: int, layer_id: int, primes: list[list[int]], pad: int,
                   cfg: V41Config) -> list[int]:
    """Pure-Python ints: XOR of compressed id * odd multiplier, mod each head's prime."""
    bound = (2**63 - 1) // cfg.engram_compressed_vocab_size // 2
    rng = np.random.default_rng(10007 * layer_id)
    mults = [int(v) * 2 + 1 for v in rng.integers(0, bound, size=cfg.engram_max_ngram_size,
                                                  dtype=np.int64)]
    offsets = np.cumsum([0] + [p for sizes in primes for p in sizes])[:-1].tolist()
    grams = [ids[pos - s] if pos - s >= 0 else pad for s in range(cfg.engram_max_ngram_size)]
    rolling, out = grams[0] * mults[0], []
    for n in range(1, cfg.engram_max_ngram_size):
        rolling ^= grams[n] * mults[n]
        out += [rolling % p + offsets[(n - 1) * cfg.engram_n_heads + h]
                for h, p in enumerate(primes[n - 1])]
    return out


@pytest.fixture(scope="module")
def flash_map():
    """129,280 tokens in 99,092 classes (runtime/engram_map.py, ``case_fold_token_map``:
    "w<j>" for every class, then "W<j>" folding onto "w<j>" for the first 30,188)."""
    cfg = V41Config.preset("flash")
    return cfg, case_fold_token_map(cfg)


def test_flash_engram_hashes_like_a_pure_python_recompute(flash_map):
    cfg, tmap = flash_map
    expected = list(range(cfg.engram_compressed_vocab_size))
    expected += list(range(cfg.vocab_size - cfg.engram_compressed_vocab_size))
    assert tmap.ids.tolist() == expected and tmap.size == 99092
    specs = {s.name: s.shape for s in parameter_specs(cfg)}  # shapes only: 384M-row tables
    for k, layer in enumerate(cfg.engram_layer_ids):
        assert specs[f"layers.{layer}.engram.embed.weight"] == (cfg.engram_num_embeddings[k], 256)

    hasher = EngramHasher(cfg, tmap)
    gen = torch.Generator().manual_seed(0)
    history = torch.randint(0, cfg.vocab_size, (12,), generator=gen)
    history[5] = cfg.engram_compressed_vocab_size + 7  # an upper-case token: class 7
    got = hasher(history, torch.arange(12))
    ids = [expected[t] for t in history.tolist()]
    pad = expected[cfg.engram_pad_id]
    for k, layer_id in enumerate(cfg.engram_layer_ids):
        primes = flash_primes(cfg, k)
        assert sum(map(sum, primes)) == cfg.engram_num_embeddings[k]  # the released table rows
        for pos in (0, 2, 3, 5, 11):
            want = flash_hash_ref(ids, pos, layer_id, primes, pad, cfg)
            assert got[pos, k].tolist() == want, (layer_id, pos)
            assert max(want) < cfg.engram_num_embeddings[k]


def test_case_fold_stand_in_folds_upper_case_onto_its_class():
    cfg = V41Config.preset("tiny").replace(vocab_size=7, engram_compressed_vocab_size=5)
    tmap = case_fold_token_map(cfg)
    assert tmap.ids.tolist() == [0, 1, 2, 3, 4, 0, 1] and tmap.size == 5
    for vocab, classes in ((11, 5), (4, 5), (3, 0)):
        with pytest.raises(ConfigError, match=f"{vocab} tokens cannot fold onto {classes} ") as info:
            case_fold_tokenizer(vocab, classes)
        assert "\n" not in str(info.value)


@pytest.mark.slow  # about 3 s: 47k parameters (62k modules) are registered, on meta
def test_flash_model_builds_on_the_meta_device(flash_map):
    from runtime.model import V41Model

    cfg, tmap = flash_map
    weights = V41Weights(cfg, device="meta")
    with pytest.raises(ConfigError, match="needs the compressed token map"):
        V41Model(weights)
    weights.engram_token_map = tmap
    model = V41Model(weights)
    assert torch.equal(model.hasher.token_ids, tmap.ids)
    for k, layer in enumerate(cfg.engram_layer_ids):
        assert weights.layers[layer].engram.embed.weight.shape == (cfg.engram_num_embeddings[k], 256)
