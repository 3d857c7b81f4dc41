"""The engine over the real model (small config, CPU float32).

References are independent of the engine: a hand-rolled loop over ``model.forward``,
a cold engine, and log-softmax recomputed in float64 from one-shot full logits.
"""

from __future__ import annotations

import pytest
import torch

from runtime.config import V41Config
from runtime.engine.engine import Engine, EngineConfig
from runtime.engine.requests import GenerateRequest
from runtime.model import SeqChunk, V41Model
from runtime.options import RuntimeOptions
from runtime.tokenizer import ByteTokenizer
from runtime.weights import V41Weights

WINDOW = 32

# Each test runs the model a dozen times: 3-20 s on a (loaded) 2-core machine.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def weights():
    # The 8-layer variant of docs/model.md §7a with a 32-token window: every structural piece,
    # a third less work than tiny.
    cfg = V41Config.preset("tiny").replace(
        num_hidden_layers=8,
        compress_ratios=(0, 0, 2, 2, 2, 1, 1, 1),
        kv_source_layer_ids=(2, 5),
        index_source_layer_ids=(2, 5, 6),
        candidate_source_layer_id=5,
        engram_layer_ids=(1, 4),
        n_routed_experts=4,
        sliding_window=WINDOW,
    )
    return V41Weights.random(cfg, seed=0)


@pytest.fixture(scope="module")
def exact(weights):
    return V41Model(weights, RuntimeOptions(swa="exact"))


def _prompt(n: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, 512, (n,), generator=g).tolist()


def _hand_greedy(model, prompt: list[int], n_new: int) -> tuple[list[int], torch.Tensor]:
    """One-shot prefill, then one token per forward; argmax with the lowest id on ties."""
    state = model.new_state()
    out = model.forward([SeqChunk(state, torch.tensor(prompt), "last")])[0].logits[-1]
    tokens, rows = [], []
    for step in range(n_new):
        rows.append(out)
        best = int(torch.nonzero(out == out.max())[0])
        tokens.append(best)
        if step + 1 < n_new:
            out = model.forward([SeqChunk(state, torch.tensor([best]), "last")])[0].logits[-1]
    return tokens, torch.stack(rows)


def test_greedy_equals_a_hand_rolled_loop(exact):
    prompt = _prompt(50, seed=1)
    want, want_logits = _hand_greedy(exact, prompt, 4)
    engine = Engine(exact, config=EngineConfig(prefill_chunk_tokens=24, prefix_cache_entries=0))
    got = engine.generate_one(GenerateRequest(prompt_ids=tuple(prompt), max_tokens=4, return_logits=True))
    assert list(got.token_ids) == want
    assert got.finish_reason == "length"
    # chunked vs one-shot prefill: equal up to float32 summation order
    torch.testing.assert_close(got.logits, want_logits, rtol=1e-4, atol=1e-3)
    t = got.timings
    assert t.prompt_tokens == 50 and t.prefill_tokens_fed == 50 and t.prefix_hit_tokens == 0
    assert t.ttft_s > 0 and len(t.token_latencies_s) == 3 and all(x > 0 for x in t.token_latencies_s)


def test_exact_prefix_hit_gives_the_cold_result(exact):
    shared = _prompt(48, seed=2)
    first, second = shared + _prompt(6, seed=3), shared + _prompt(9, seed=4)
    cfg = EngineConfig(prefill_chunk_tokens=32, prefix_block_tokens=16, prefix_cache_entries=8)
    warm = Engine(exact, config=cfg)
    warm.generate_one(GenerateRequest(prompt_ids=tuple(first), max_tokens=1))
    hit = warm.generate_one(GenerateRequest(prompt_ids=tuple(second), max_tokens=3, return_logits=True))
    # A fresh engine with the same settings computes the same chunks ([0, 32), [32, 48),
    # [48, 57)) cold, so the two runs differ only in where positions < 48 came from.
    cold = Engine(exact, config=cfg)
    ref = cold.generate_one(GenerateRequest(prompt_ids=tuple(second), max_tokens=3, return_logits=True))
    assert ref.timings.prefix_hit_tokens == 0
    assert hit.timings.prefix_hit_tokens == 48
    assert hit.timings.prefill_tokens_fed == len(second) - 48
    assert hit.token_ids == ref.token_ids
    assert torch.equal(hit.logits, ref.logits)  # exact means bit for bit on CPU


def test_bounded_replay_refeeds_the_window_and_ignores_short_hits(weights):
    bounded = V41Model(weights, RuntimeOptions(swa="bounded"))
    cfg = EngineConfig(prefill_chunk_tokens=64, prefix_block_tokens=16, prefix_cache_entries=8)
    engine = Engine(bounded, config=cfg)
    long_prefix, short_prefix = _prompt(48, seed=5), _prompt(32, seed=6)
    engine.generate_one(GenerateRequest(prompt_ids=tuple(long_prefix + [7, 8]), max_tokens=1))
    engine.generate_one(GenerateRequest(prompt_ids=tuple(short_prefix + [7, 8]), max_tokens=1))
    long_hit = engine.generate_one(GenerateRequest(prompt_ids=tuple(long_prefix + [9] * 5), max_tokens=1))
    assert long_hit.timings.prefix_hit_tokens == 48
    assert long_hit.timings.prefill_tokens_fed == 5 + WINDOW  # the last W cached tokens are replayed
    short_hit = engine.generate_one(GenerateRequest(prompt_ids=tuple(short_prefix + [9] * 5), max_tokens=1))
    assert short_hit.timings.prefix_hit_tokens == 0  # hits <= W are not adopted
    assert short_hit.timings.prefill_tokens_fed == 37


@pytest.fixture(scope="module")
def tokenizer():
    corpus = ["The quick brown fox jumps over the lazy dog. Question: what is 3 + 4? Answer: 7.\n"] * 5
    return ByteTokenizer.trained(corpus, vocab_size=512)


def test_stop_strings_and_stop_tokens(exact, tokenizer):
    engine = Engine(exact, tokenizer=tokenizer, config=EngineConfig(prefix_cache_entries=0))
    prompt = "Question: what is 3 + 4?"
    free = engine.generate_one(GenerateRequest(prompt=prompt, max_tokens=4, ignore_eos=True))
    text = free.text
    assert text == tokenizer.decode(free.token_ids)
    # a stop string that first completes with a later token: its text must be cut
    k = next(i for i in range(2, 5) if tokenizer.decode(free.token_ids[:i]) != tokenizer.decode(free.token_ids[:i - 1])
             and "\ufffd" not in tokenizer.decode(free.token_ids[:i]))
    upto = tokenizer.decode(free.token_ids[:k])
    stop = upto[-1]
    cut = upto.index(stop)
    stopped = engine.generate_one(GenerateRequest(prompt=prompt, max_tokens=4, stop=(stop,), ignore_eos=True))
    assert stopped.finish_reason == "stop" and stopped.stop_reason == stop
    assert stopped.text == upto[:cut]
    assert stop not in stopped.text
    assert stopped.token_ids == free.token_ids[:len(stopped.token_ids)]
    # a stop token ends generation on that token; its text is not decoded
    third = free.token_ids[2]
    by_token = engine.generate_one(GenerateRequest(prompt=prompt, max_tokens=4, stop_token_ids=(third,),
                                                   ignore_eos=True))
    first_at = free.token_ids.index(third)
    assert by_token.token_ids == free.token_ids[:first_at + 1]
    assert by_token.stop_reason == third and by_token.finish_reason == "stop"


def test_seeded_sampling_is_reproducible_and_batch_independent(weights):
    model = V41Model(weights, RuntimeOptions(swa="exact", batch_invariant=True))
    # two in flight at a time: the third request waits and joins when the first finishes
    engine = Engine(model, config=EngineConfig(prefill_chunk_tokens=32, prefix_cache_entries=0,
                                               max_batch_requests=2))
    target = GenerateRequest(prompt_ids=tuple(_prompt(24, seed=7)), max_tokens=3, temperature=1.5, top_p=0.95,
                             seed=11)
    others = [GenerateRequest(prompt_ids=tuple(_prompt(n, seed=n)), max_tokens=1, temperature=1.0, seed=n)
              for n in (10, 40)]
    alone = engine.generate([target])[0]  # a second run, in another batch: same tokens
    results = engine.generate([others[0], target, others[1]])
    assert [r.request_id for r in results] == ["req-0", "req-1", "req-2"]  # in request order
    assert results[2].timings.queued_s > results[0].timings.queued_s  # admitted later
    assert alone.token_ids == results[1].token_ids


def test_prompt_logprobs_equal_float64_log_softmax_of_full_logits(exact):
    prompt = _prompt(45, seed=8)
    state = exact.new_state()
    full = exact.forward([SeqChunk(state, torch.tensor(prompt), "all")])[0].logits.double()  # [45, V]
    ref = full - torch.logsumexp(full, dim=-1, keepdim=True)
    engine = Engine(exact, config=EngineConfig(prefill_chunk_tokens=16, prefix_cache_entries=0))
    res = engine.generate_one(GenerateRequest(prompt_ids=tuple(prompt), max_tokens=1, prompt_logprobs=3,
                                              logprobs=2, return_logits=True))
    assert res.prompt_logprobs[0] is None and len(res.prompt_logprobs) == 45
    for pos in range(1, 45):
        entry = res.prompt_logprobs[pos]
        assert entry.token_id == prompt[pos]
        assert abs(entry.logprob - float(ref[pos - 1, prompt[pos]])) < 1e-3
        order = sorted(range(ref.shape[1]), key=lambda i: (-float(ref[pos - 1, i]), i))[:3]
        assert list(entry.top_ids) == order
    # chunked (16) vs one-shot: equal up to float32 summation order
    torch.testing.assert_close(res.prompt_logits.double(), full, rtol=1e-4, atol=1e-3)
    gen = res.logprobs[0]
    assert gen.token_id == res.token_ids[0] and gen.top_ids[0] == res.token_ids[0]
    assert abs(gen.logprob - float(ref[-1, gen.token_id])) < 1e-3


def test_prompt_logprob_requests_are_never_decoder_trimmed(weights, exact):
    """Bounded mode trims layers after the cut to the last W rows of a prefill chunk, but a
    request that asks for prompt logprobs needs every row: it must match exact mode."""
    bounded = V41Model(weights, RuntimeOptions(swa="bounded"))
    prompt = tuple(_prompt(3 * WINDOW, seed=9))
    cfg = EngineConfig(prefill_chunk_tokens=64, prefix_cache_entries=0)
    request = GenerateRequest(prompt_ids=prompt, max_tokens=1, prompt_logprobs=1, return_logits=True)
    got = Engine(bounded, config=cfg).generate_one(request)
    ref = Engine(exact, config=cfg).generate_one(request)
    assert torch.equal(got.prompt_logits, ref.prompt_logits)
    assert got.prompt_logprobs == ref.prompt_logprobs
    # the same prompt without prompt logprobs is trimmed, and its last-row logits differ
    plain = GenerateRequest(prompt_ids=prompt, max_tokens=1, return_logits=True)
    trimmed = Engine(bounded, config=cfg).generate_one(plain)
    assert not torch.equal(trimmed.logits[0], ref.prompt_logits[-1])
