"""The boundary probes: shipped bytes = generator output, and every item sits on the
boundary its class claims, re-measured on the real prompt with the real tokenizer.

The placement checks do not reuse the generator's arithmetic: positions come from
tokenizing prompt prefixes with the testbed's ``tokenizer.json``, and the prefix-cache
hit H is recomputed here from the engine's storing rule (chunk ends and the last whole
block, when they are whole blocks) over *all* probe prompts, so a prompt that shares a
cached prefix with another one would be caught; one test also asks the runtime's own
engine for H after a priming pass, as warm mode does.
"""

from __future__ import annotations

import hashlib
import random
import re
from pathlib import Path

import pytest
import tomllib
import torch

import tasks
from runtime import presets
from runtime.engine import Engine
from runtime.engine.requests import GenerateRequest
from runtime.model import V41Model
from runtime.scheduling import EngineConfig
from runtime.testbed import testbed_dir as checkpoint_dir
from runtime.tokenizer_file import load_tokenizer
from runtime.weights import V41Weights
from tasks.data_files import DEFAULT_DATA_DIR, TESTBED_FILES, read_verified
from tasks.testbed import boundaries
from tasks.testbed.generate import file_name, write_all
from tasks.testbed.probe_spec import PROBE_TASKS
from tasks.testbed.testset import jsonl_bytes

REPO = Path(__file__).resolve().parents[2]
CONFIG = presets.testbed_config()
TOKENIZER = load_tokenizer(checkpoint_dir() / "tokenizer.json", vocab_size=CONFIG.vocab_size)
W = CONFIG.sliding_window
BLOCK = EngineConfig().prefix_block_tokens
CHUNK = EngineConfig().prefill_chunk_tokens


def rendered() -> dict[str, list[tuple[str, list[int], str]]]:
    """Per probe task: (prompt, token ids, queried key) of every item."""
    out = {}
    for name in PROBE_TASKS:
        task = tasks.get(name)
        rows = []
        for item in task.items():
            prompt = task.render(item).prompt
            key = re.search(r"\nWhat is ([A-Z][0-9][A-Z])\?\nAnswer:\Z", prompt).group(1)
            rows.append((prompt, TOKENIZER.encode(prompt), key))
        out[name] = rows
    return out


ROWS = rendered()


def stored_prefixes(n: int) -> set[int]:
    """Prefix lengths a priming prefill of ``n`` tokens caches (runtime/engine/engine.py:
    chunks end at multiples of the chunk size, and at the last whole block; a snapshot is
    kept where a chunk ends on a whole block)."""
    ends = set(range(CHUNK, n + 1, CHUNK)) | {n // BLOCK * BLOCK, n}
    return {e for e in ends if e > 0 and e % BLOCK == 0}


def cache_hits() -> dict[tuple[str, int], int]:
    """H per (task, item index): the longest cached prefix of at most n - 1 tokens, the
    cache holding what priming every probe prompt stored."""
    cache = set()
    for rows in ROWS.values():
        for _, ids, _ in rows:
            cache |= {tuple(ids[:m]) for m in stored_prefixes(len(ids))}
    hits = {}
    for name, rows in ROWS.items():
        for i, (_, ids, _) in enumerate(rows):
            hits[name, i] = max((m for m in range(BLOCK, len(ids), BLOCK)
                                 if tuple(ids[:m]) in cache), default=0)
    return hits


HITS = cache_hits()


def anchor(prompt: str, key: str) -> tuple[int, int]:
    """Token positions of the queried record's first token and last value digit."""
    block = prompt.rindex("\n\nQuestion: ")
    match = re.compile(rf"\n({key}=[0-9]+)\n").search(prompt, block)
    first = len(TOKENIZER.encode(prompt[:match.start(1)]))
    last = len(TOKENIZER.encode(prompt[:match.end(1)])) - 1
    return first, last


CLAIMS = {  # (n, H, record's first token, anchor) -> the class's boundary holds
    "suffix_wm1": lambda n, h, s, a: n - h == W - 1,
    "suffix_w": lambda n, h, s, a: n - h == W,
    "suffix_wp1": lambda n, h, s, a: n - h == W + 1,
    "ratio_even": lambda n, h, s, a: n % 2 == 0 and n - h > W + 1,
    "ratio_odd": lambda n, h, s, a: n % 2 == 1 and n - h > W + 1,
    "replay_m1": lambda n, h, s, a: a == h - W - 1,
    "replay_0": lambda n, h, s, a: a == h - W,
    "replay_p1": lambda n, h, s, a: a == h - W + 1,
    # the line (its "\n" at a + 1 included) starts before the chunk boundary, ends after it
    "chunk": lambda n, h, s, a: s < CHUNK <= a + 1,
    "hit_aligned": lambda n, h, s, a: n % BLOCK == 0 and h <= n - BLOCK,
    "hit_unaligned": lambda n, h, s, a: n % BLOCK == 1 and h == n - 1,
}


def test_restated_boundaries_are_the_runtimes():
    assert boundaries.WINDOW == W == 32
    assert boundaries.COMPRESS_RATIOS == tuple(CONFIG.compress_ratios) == (0, 2, 1, 1)
    assert boundaries.PREFIX_BLOCK == BLOCK == 64
    assert boundaries.PREFILL_CHUNK == CHUNK == 256
    plan = tomllib.loads((REPO / "validate/plan/examples/testbed-probes.toml").read_text())
    assert "prefill_chunk_tokens" not in plan["engine"] and plan["warm"] is True
    assert [t["name"] for t in plan["tasks"]] == list(PROBE_TASKS)


def test_shipped_files_are_the_generators_output(tmp_path):
    hashes = write_all(tmp_path)
    for name in PROBE_TASKS:
        shipped = (DEFAULT_DATA_DIR / TESTBED_FILES[name].relpath).read_bytes()
        assert jsonl_bytes(name) == shipped, f"{name}: regenerate and update the hashes"
        assert (tmp_path / file_name(name)).read_bytes() == shipped
        digest = hashlib.sha256(shipped).hexdigest()
        assert digest == TESTBED_FILES[name].sha256 == hashes[file_name(name)]
        assert read_verified(TESTBED_FILES[name]) == shipped


def test_registered_with_sizes_and_the_lookup_request_shape():
    assert len(PROBE_TASKS) == len(CLAIMS) == 11
    assert [f"testbed_probe_{c}" for c in CLAIMS] == list(PROBE_TASKS)
    assert set(PROBE_TASKS) <= set(tasks.names())
    lookup_prefix = tasks.get("testbed_lookup").render(tasks.get("testbed_lookup").items()[0]).prompt
    lookup_prefix = lookup_prefix[: lookup_prefix.rindex("Question: ")]
    for name in PROBE_TASKS:
        task = tasks.get(name)
        assert len(task.items()) == 100 and task.version == "1.0"
        request = task.render(task.items()[0])
        assert request.prompt.startswith(lookup_prefix)
        assert request.gen.max_gen_toks == 64 and request.gen.until[0] == "\n"


@pytest.mark.parametrize("cls", list(CLAIMS))
def test_every_item_sits_on_its_boundary(cls):
    name = f"testbed_probe_{cls}"
    for i, (prompt, ids, key) in enumerate(ROWS[name]):
        n, h = len(ids), HITS[name, i]
        first, last = anchor(prompt, key)
        assert h > W, (name, i, n, h)  # replay engages on every probe in warm mode
        assert boundaries.warm_hit(n) == h  # the generator's rule agrees with the cache's
        assert CLAIMS[cls](n, h, first, last), (name, i, n, h, first, last)
        if cls in ("replay_m1", "replay_0", "replay_p1", "chunk"):
            continue
        assert n - 1 - last >= 3 * W, (name, i, n, last)  # as far back as testbed_lookup


def test_items_are_answerable_and_distinct():
    for name, rows in ROWS.items():
        task = tasks.get(name)
        assert len({p for p, _, _ in rows}) == len(rows)
        for item, (prompt, _, key) in zip(task.items(), rows, strict=True):
            block = prompt[prompt.rindex("\n\nQuestion: "):]
            defs = re.findall(r"\n([A-Z][0-9][A-Z])=([0-9]+)", block)
            assert len({k for k, _ in defs}) == len(defs)
            value = dict(defs)[key]
            assert item.target == f"{key}={value}. #### {value}"


def test_the_runtime_engine_hits_where_the_test_says():
    """Warm mode for real: prime two items per class, then ask for one token each and
    read the hit the engine took (exact SWA takes every hit of a complete snapshot)."""
    weights = V41Weights.random(CONFIG, 0, dtype=torch.float32)
    engine = Engine(V41Model(weights), TOKENIZER, EngineConfig())
    picks = [(name, i) for name in PROBE_TASKS
             for i in random.Random(name).sample(range(100), 2)]
    prompts = [tuple(ROWS[name][i][1]) for name, i in picks]
    engine.generate([GenerateRequest(prompt_ids=p, max_tokens=0) for p in prompts])
    results = engine.generate([GenerateRequest(prompt_ids=p, max_tokens=1) for p in prompts])
    for (name, i), result in zip(picks, results, strict=True):
        assert result.timings.prefix_hit_tokens == HITS[name, i], (name, i)
