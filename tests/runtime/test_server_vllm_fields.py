"""What vLLM's server does and ``v41val serve`` now does too: ``min_p`` (against a float64
recompute), chat without ``max_tokens`` runs to what the context leaves, ``echo`` +
``stream`` + ``logprobs`` together (equal to the non-streamed answer), and special-token
strings in a prompt become their ids."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest
import torch
from scipy.special import softmax

from runtime.engine import sampling
from validate.engines.builtin_source import ModelSource

SOURCE = ModelSource.micro(seed=3)
PROMPT = "Question: what is 6 times 7?\nAnswer:"


def _post(server, path, body):
    reply = httpx.post(f"{server.base_url}{path}", json=body, timeout=120)
    return reply.status_code, reply.json()


def _sse(server, path, body) -> list[dict]:
    with httpx.stream("POST", f"{server.base_url}{path}", json=body, timeout=120) as r:
        assert r.status_code == 200
        lines = [line[6:] for line in r.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


@pytest.mark.parametrize("temperature, min_p, top_p", [(1.0, 0.3, 1.0), (0.7, 0.05, 0.9),
                                                        (2.0, 0.9, 1.0), (1.0, 0.0, 0.5)])
def test_min_p_keeps_what_a_float64_recompute_keeps(temperature, min_p, top_p):
    logits = torch.tensor(np.random.default_rng(5).normal(0, 2, 300))
    p = softmax(logits.numpy() / temperature)
    p = np.where(p >= min_p * p.max(), p, 0.0)
    p /= p.sum()
    order = np.argsort(-p, kind="stable")
    before = np.cumsum(p[order]) - p[order]
    keep = np.zeros_like(p, dtype=bool)
    keep[order[(before < top_p) | (np.arange(p.size) == 0)]] = True
    expected = np.where(keep, p, 0.0) / np.where(keep, p, 0.0).sum()
    got = sampling.filtered_probs(logits, temperature, top_p=top_p, min_p=min_p).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-15)


def test_min_p_reaches_the_sampler_through_the_server(server):
    """min_p 1 leaves only the most likely token: every seed samples the greedy answer."""
    body = {"prompt": PROMPT, "max_tokens": 4}
    greedy = _post(server, "/completions", {**body, "temperature": 0})[1]["choices"][0]["text"]
    free = _post(server, "/completions", {**body, "temperature": 1.5, "seed": 1, "n": 4})[1]
    assert any(c["text"] != greedy for c in free["choices"])  # sampling does differ here
    kept = _post(server, "/completions", {**body, "temperature": 1.5, "seed": 1, "n": 4,
                                          "min_p": 1.0})[1]
    assert [c["text"] for c in kept["choices"]] == [greedy] * 4
    status, error = _post(server, "/completions", {**body, "min_p": 1.5})
    assert status == 400 and error["error"]["message"].startswith("min_p: ")


def test_chat_without_max_tokens_is_bounded_by_the_context_only(server):
    """vLLM has no 16-token chat default: min_tokens 20 with EOS pushed up ends with EOS
    as token 21 (the 16-token default would refuse min_tokens 20 as above max_tokens)."""
    eos = SOURCE.tokenizer().eos_id
    status, reply = _post(server, "/chat/completions", {
        "messages": [{"role": "user", "content": "Hi?"}], "temperature": 0,
        "min_tokens": 20, "logit_bias": {str(eos): 100}})
    assert status == 200, reply
    assert reply["usage"]["completion_tokens"] == 21
    assert reply["choices"][0]["finish_reason"] == "stop"
    status, _ = _post(server, "/completions", {"prompt": "Hi?", "min_tokens": 20})
    assert status == 400  # completions keep OpenAI's 16


@pytest.mark.parametrize("max_tokens", [3, 0])
def test_echo_stream_and_logprobs_together_equal_the_plain_answer(server, max_tokens):
    body = {"prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0, "echo": True,
            "logprobs": 2}
    plain = _post(server, "/completions", body)[1]["choices"][0]
    chunks = _sse(server, "/completions", {**body, "stream": True})
    first = chunks[0]["choices"][0]
    assert first["text"] == PROMPT
    n = len(SOURCE.tokenizer().encode(PROMPT))
    lp, want = first["logprobs"], plain["logprobs"]
    assert lp["tokens"] == want["tokens"][:n] and lp["text_offset"] == want["text_offset"][:n]
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    assert lp["token_logprobs"][1:] == pytest.approx(want["token_logprobs"][1:n], abs=1e-6)
    for got, expected in zip(lp["top_logprobs"][1:], want["top_logprobs"][1:n], strict=True):
        assert got == pytest.approx(expected, abs=1e-6)
    later = [c["choices"][0] for c in chunks[1:] if c["choices"]]
    generated = [t for c in later if c["logprobs"] for t in c["logprobs"]["tokens"]]
    assert generated == want["tokens"][n:]
    assert "".join(c["choices"][0]["text"] for c in chunks if c["choices"]) == plain["text"]


def test_special_token_strings_in_a_prompt_are_their_ids(server):
    tok = SOURCE.tokenizer()
    counted = httpx.post(f"{server.root}/tokenize", timeout=60,
                         json={"prompt": "a<|eos|>b<|pad|>"}).json()
    assert counted["tokens"] == [3 + 97, tok.eos_id, 3 + 98, tok.pad_id]
    _, reply = _post(server, "/completions", {"prompt": "<|bos|>Hi", "max_tokens": 1,
                                              "temperature": 0})
    _, as_ids = _post(server, "/completions", {"prompt": [tok.bos_id, 3 + 72, 3 + 105],
                                               "max_tokens": 1, "temperature": 0})
    assert reply["usage"]["prompt_tokens"] == 3
    assert reply["choices"][0]["text"] == as_ids["choices"][0]["text"]
