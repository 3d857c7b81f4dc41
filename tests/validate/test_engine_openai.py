"""The openai engine against a real HTTP server on loopback (see the fake server module):
streaming timings, retries, 4xx and malformed replies, concurrency bound, loglikelihoods."""

from __future__ import annotations

import asyncio
import importlib.util
import math
import sys
from pathlib import Path

import pytest

from tasks.request import ChatMessage, Generation, GenerationParams, Loglikelihoods, Request
from validate.engines.base import EngineFailure, EngineResult, iterate_blocking
from validate.engines.errors import (
    EngineReplyMalformed,
    EngineRequestRejected,
    EngineUnavailable,
    EngineUnsupported,
)
from validate.engines.openai import OpenAIEngine
from validate.engines.openai_config import OpenAIEngineConfig


def _load_fake():
    path = Path(__file__).with_name("fake_openai_server.py")
    spec = importlib.util.spec_from_file_location("v41val_fake_openai_server", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


fake = _load_fake()
# Cancelling requests that are still connecting (closing a stream early) leaves an anyio
# connect coroutine unawaited inside httpcore; Python reports it when it is collected.
pytestmark = pytest.mark.filterwarnings(
    "ignore:coroutine 'connect_tcp.<locals>.try_connect' was never awaited:RuntimeWarning")
GEN = GenerationParams(max_gen_toks=32, until=("\n\n",))


@pytest.fixture(scope="module")
def server():
    srv = fake.FakeServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def state(server):
    server.state.reset()
    return server.state


def _engine(server, **overrides) -> OpenAIEngine:
    settings = dict(base_url=server.base_url, model="fake-model", concurrency=4, timeout_s=0.5,
                    max_attempts=4, backoff_base_s=0.01, backoff_max_s=0.05, jitter_seed=0)
    settings.update(overrides)
    return OpenAIEngine(OpenAIEngineConfig(**settings))


def _gen(item: str, prompt: str, gen: GenerationParams = GEN) -> Request:
    return Request(task="toy", item_id=item, kind="generate", prompt=prompt, gen=gen)


def _run_all(engine, requests):
    async def collect():
        return [o async for o in engine.stream(requests)]

    return asyncio.run(collect())


def _expected_text(prompt_key: str, max_tokens: int) -> str:
    return "".join(fake.generated_tokens(prompt_key, max_tokens))


def test_streamed_completion_text_tokens_and_timings(server, state):
    prompt = "Question: what is two plus two?\nAnswer:"
    result = asyncio.run(_engine(server).complete(_gen("q1", prompt)))
    n = len(fake.generated_tokens(prompt, 32))
    assert result.response == Generation(_expected_text(prompt, 32), "stop", n)
    t = result.timings
    assert t.n_prompt_tokens == len(fake.tokenize(prompt)) and t.n_output_tokens == n
    assert 0 < t.ttft_s < t.e2e_s
    assert len(t.itl_s) == n - 1 and all(gap >= 0 for gap in t.itl_s)
    # the server waits TOKEN_DELAY_S between tokens: the gaps come from the stream
    assert sum(t.itl_s) >= 0.5 * (n - 1) * fake.TOKEN_DELAY_S
    assert t.ttft_s + sum(t.itl_s) <= t.e2e_s + 1e-9
    assert math.isclose(t.tpot_s, (t.e2e_s - t.ttft_s) / (n - 1))
    assert result.attempts == 1 and result.engine["endpoint"] == "/completions"


def test_length_finish_and_top_logprobs_of_output_tokens(server, state):
    prompt = "Count:"
    gen = GenerationParams(max_gen_toks=3)
    for stream in (True, False):
        result = asyncio.run(_engine(server, stream=stream, top_logprobs=2).complete(
            _gen("q2", prompt, gen)))
        out = fake.generated_tokens(prompt, 3)
        assert result.response == Generation("".join(out), "length", 3)
        first = len(fake.tokenize(prompt))
        assert [t.token for t in result.token_logprobs] == out
        assert [t.logprob for t in result.token_logprobs] == [
            fake.token_logprob(tok, first + k) for k, tok in enumerate(out)]
        assert dict(result.token_logprobs[0].top)["<alt>"] == fake.alternative(out[0], first)[1]
        assert (result.timings.ttft_s is None) == (not stream)


def test_chat_streaming_and_whole(server, state):
    messages = (ChatMessage("system", "Be brief."), ChatMessage("user", "Hello?"))
    key = "<system>Be brief.<user>Hello?"
    request = Request(task="toy", item_id="c1", kind="generate", messages=messages, gen=GEN)
    for stream in (True, False):
        result = asyncio.run(_engine(server, stream=stream, top_logprobs=1).complete(request))
        assert result.response.text == _expected_text(key, 32)
        assert result.engine["endpoint"] == "/chat/completions"
        assert [t.token for t in result.token_logprobs] == fake.generated_tokens(key, 32)
        if stream:
            assert 0 < result.timings.ttft_s < result.timings.e2e_s


def test_failing_requests_succeed_after_the_expected_retries(server, state):
    prompts = {"a": "ok one", "b": "FAIL500x2 two", "c": "FAIL503x1 three", "d": "SLOWx1 four",
               "e": "FAIL500x3 five"}
    requests = [_gen(k, p) for k, p in prompts.items()]
    outcomes = _run_all(_engine(server, timeout_s=0.5, max_attempts=4), requests)
    assert all(isinstance(o, EngineResult) for o in outcomes)
    attempts = {o.request.item_id: o.attempts for o in outcomes}
    assert attempts == {"a": 1, "b": 3, "c": 2, "d": 2, "e": 4}
    assert {k: state.calls[p] for k, p in prompts.items()} == attempts
    for o in outcomes:
        assert o.response.text == _expected_text(o.request.prompt, 32)


def test_stream_cut_short_is_retried(server, state):
    result = asyncio.run(_engine(server).complete(_gen("cut", "CUTx2 go")))
    assert result.attempts == 3 and state.calls["CUTx2 go"] == 3
    assert result.response.text == _expected_text("CUTx2 go", 32)


def test_non_json_stream_chunk_is_a_one_line_error(server, state):
    with pytest.raises(EngineReplyMalformed) as info:
        asyncio.run(_engine(server).complete(_gen("s1", "BADSTREAM q")))
    message = str(info.value)
    assert "\n" not in message and message.startswith("toy/s1: stream chunk 2 ")
    assert "is not JSON" in message and state.calls["BADSTREAM q"] == 1


def test_closing_the_stream_early_cancels_the_rest(server, state):
    requests = [_gen(f"e{k}", f"early {k}") for k in range(8)]

    async def first_two():
        got = []
        async for outcome in _engine(server, concurrency=2).stream(requests):
            got.append(outcome)
            if len(got) == 2:
                break
        return got

    got = asyncio.run(first_two())
    assert len(got) == 2
    assert sum(state.calls.values()) < len(requests)  # the rest were never sent


def test_retries_are_bounded(server, state):
    request = _gen("x", "FAIL503x9 never")
    with pytest.raises(EngineUnavailable) as info:
        asyncio.run(_engine(server, max_attempts=3).complete(request))
    message = str(info.value)
    assert "\n" not in message and "toy/x" in message and "3 attempts" in message
    assert "HTTP 503" in message and state.calls["FAIL503x9 never"] == 3


def test_400_is_one_line_error_without_retry(server, state):
    with pytest.raises(EngineRequestRejected) as info:
        asyncio.run(_engine(server).complete(_gen("item-7", "BAD400 please")))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("toy/item-7: POST http://") and " answered HTTP 400: " in message
    assert "prompt contains the forbidden word BAD400" in message
    assert info.value.status_code == 400 and state.calls["BAD400 please"] == 1


def test_failures_come_back_in_the_stream_without_stopping_others(server, state):
    requests = [_gen("good", "fine"), _gen("bad", "BAD400 x"), _gen("good2", "fine too")]
    outcomes = _run_all(_engine(server), requests)
    failures = [o for o in outcomes if isinstance(o, EngineFailure)]
    assert [f.request.item_id for f in failures] == ["bad"] and failures[0].index == 1
    assert isinstance(failures[0].error, EngineRequestRejected)
    assert sorted(o.index for o in outcomes if isinstance(o, EngineResult)) == [0, 2]


@pytest.mark.parametrize(("marker", "stream", "expected"), [
    ("BADJSON", False, "is not JSON"),
    ("NOCHOICES", False, "no field choices"),
])
def test_malformed_replies_are_one_line_errors(server, state, marker, stream, expected):
    with pytest.raises(EngineReplyMalformed) as info:
        asyncio.run(_engine(server, stream=stream).complete(_gen("m1", f"{marker} q")))
    message = str(info.value)
    assert "\n" not in message and message.startswith("toy/m1: ") and expected in message
    assert state.calls[f"{marker} q"] == 1  # not retried


@pytest.mark.parametrize("bound", [1, 3])
def test_concurrency_never_exceeds_the_bound(server, state, bound):
    requests = [_gen(f"i{k}", f"prompt number {k}") for k in range(12)]
    outcomes = _run_all(_engine(server, concurrency=bound), requests)
    assert len(outcomes) == 12 and all(isinstance(o, EngineResult) for o in outcomes)
    assert 1 <= state.max_in_flight <= bound
    if bound > 1:
        assert state.max_in_flight > 1, "requests never overlapped; the bound was not tested"


def _reference_loglikelihood(context: str, continuation: str) -> tuple[float, bool]:
    """lm-eval's way: tokenize context and continuation separately, sum the
    continuation tokens' logprobs (positions after the context), greedy if each token
    beats its alternative."""
    ctx_tokens = fake.tokenize(context)
    total, greedy = 0.0, True
    for k, tok in enumerate(fake.tokenize(continuation)):
        pos = len(ctx_tokens) + k
        total += fake.token_logprob(tok, pos)
        greedy &= fake.token_logprob(tok, pos) >= fake.alternative(tok, pos)[1]
    return total, greedy


def test_loglikelihood_sums_match_the_servers_logprobs(server, state):
    context = "Question: which is right?\nAnswer:"
    choices = (" (A)", " (B) forty two", " (C)", " (D) none of these")
    request = Request(task="gpqa", item_id="rec1", kind="loglikelihood", prompt=context,
                      continuations=choices)
    result = asyncio.run(_engine(server).complete(request))
    expected = [_reference_loglikelihood(context, c) for c in choices]
    assert isinstance(result.response, Loglikelihoods)
    for got, (want, _) in zip(result.response.values, expected, strict=True):
        assert math.isclose(got, want, rel_tol=0, abs_tol=1e-12)
    assert result.response.is_greedy == tuple(g for _, g in expected)
    assert result.engine["continuation_tokens"] == [len(fake.tokenize(c)) for c in choices]
    assert result.engine["boundary_straddles"] == []


def test_loglikelihood_moves_trailing_space_and_reports_straddles(server, state):
    # context ends with a space: like lm-eval, it belongs to the continuation
    spaced = Request(task="gpqa", item_id="rec2", kind="loglikelihood", prompt="Answer: ",
                     continuations=("yes", "no way"))
    result = asyncio.run(_engine(server).complete(spaced))
    want = [_reference_loglikelihood("Answer:", " yes")[0],
            _reference_loglikelihood("Answer:", " no way")[0]]
    assert list(result.response.values) == pytest.approx(want, abs=1e-12)
    # "The Answer" + "s (A)": the server's token " Answers" straddles the boundary; it is
    # counted (it is the only token that covers the continuation's "s") and reported
    merged = Request(task="gpqa", item_id="rec3", kind="loglikelihood", prompt="The Answer",
                     continuations=("s (A)",))
    result = asyncio.run(_engine(server).complete(merged))
    assert result.engine["boundary_straddles"] == [0]
    assert result.response.values[0] == pytest.approx(
        fake.token_logprob(" Answers", 1) + fake.token_logprob(" (A)", 2), abs=1e-12)


def test_loglikelihood_over_chat_is_refused(server, state):
    request = Request(task="gpqa", item_id="rec4", kind="loglikelihood",
                      messages=(ChatMessage("user", "Q?"),), continuations=(" A",))
    with pytest.raises(EngineUnsupported, match="gpqa/rec4"):
        asyncio.run(_engine(server).complete(request))


def test_unreachable_server_fails_after_bounded_attempts():
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    engine = OpenAIEngine(OpenAIEngineConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m",
                                             max_attempts=2, backoff_base_s=0.01))
    with pytest.raises(EngineUnavailable, match="toy/u1: 2 attempts"):
        asyncio.run(engine.complete(_gen("u1", "hello")))


def test_blocking_iteration_for_synchronous_callers(server, state):
    requests = [_gen(f"b{k}", f"blocking {k}") for k in range(5)]
    outcomes = list(iterate_blocking(_engine(server), requests))
    assert sorted(o.index for o in outcomes) == list(range(5))
    assert all(o.response.text == _expected_text(o.request.prompt, 32) for o in outcomes)


def test_teacher_forced_tokens_carry_logprobs_and_top_k(server, state):
    prompt, forced = "Q: what now?\nA:", " t5 t17 t3"
    request = _gen("tf1", prompt)
    got = asyncio.run(_engine(server).teacher_forced(request, forced, top_k=2))
    first = len(fake.tokenize(prompt))
    want = fake.tokenize(forced)
    assert [t.token for t in got.tokens] == want
    assert [t.logprob for t in got.tokens] == [
        fake.token_logprob(tok, first + k) for k, tok in enumerate(want)]
    assert [dict(t.top)["<alt>"] for t in got.tokens] == [
        fake.alternative(tok, first + k)[1] for k, tok in enumerate(want)]
    assert not got.straddles_boundary and got.attempts == 1
