"""``v41val serve``'s app on a real uvicorn on loopback (micro model): greedy text equal
to the runtime engine's, echo logprobs equal to a float64 recompute with offsets that
index the prompt, SSE streams that reassemble to the same text, chat over the
documented template, and one-line 4xx refusals after which the server keeps serving."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import torch

from runtime.engine.engine import Engine
from runtime.engine.requests import GenerateRequest
from runtime.model import SeqChunk, V41Model
from runtime.options import RuntimeOptions
from validate.engines.builtin_source import ModelSource

SOURCE = ModelSource.micro(seed=2)
PROMPT = "Question: what is 6 times 7?\nAnswer:"


@pytest.fixture(scope="module")
def reference(pool):
    weights = pool.weights(SOURCE)
    return Engine(V41Model(weights, RuntimeOptions()), SOURCE.tokenizer())


def _post(server, path, body, **kw):
    return httpx.post(f"{server.base_url}{path}", json=body, timeout=120, **kw)


def test_health_and_models(server):
    assert httpx.get(f"{server.root}/health").json() == {"status": "ok"}
    data = httpx.get(f"{server.base_url}/models").json()["data"]
    assert [m["id"] for m in data] == ["v41val-micro"]
    assert data[0]["max_model_len"] == 65536


def test_greedy_completion_equals_runtime_engine(server, reference):
    reply = _post(server, "/completions", {"model": "v41val-micro", "prompt": PROMPT,
                                           "max_tokens": 5, "temperature": 0}).json()
    want = reference.generate([GenerateRequest(prompt=PROMPT, max_tokens=5)])[0]
    choice = reply["choices"][0]
    assert choice["text"] == want.text and choice["finish_reason"] == want.finish_reason
    usage = reply["usage"]
    assert usage["prompt_tokens"] == len(want.prompt_ids)
    assert usage["completion_tokens"] == len(want.token_ids) == 5
    assert usage["total_tokens"] == usage["prompt_tokens"] + 5


def test_echo_logprobs_match_float64_recompute_and_offsets_index_the_prompt(server, pool):
    prompt = "Hello there, général!"
    reply = _post(server, "/completions", {"prompt": prompt, "max_tokens": 1, "echo": True,
                                           "logprobs": 2, "temperature": 0}).json()
    choice = reply["choices"][0]
    lp = choice["logprobs"]
    tok = SOURCE.tokenizer()
    ids = tok.encode(prompt)
    n = len(ids)
    assert choice["text"].startswith(prompt) and len(lp["tokens"]) == n + 1
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    # offsets: token i starts where the text of tokens < i ends ("é" is two byte tokens)
    for i in range(n):
        assert prompt[: lp["text_offset"][i]] == tok.decode(ids[:i]).rstrip("\ufffd")
    assert lp["text_offset"][n] == len(prompt)
    model = V41Model(pool.weights(SOURCE), RuntimeOptions())
    logits = model.forward([SeqChunk(model.new_state(), torch.tensor(ids), "all")])[0].logits
    logp = torch.log_softmax(logits.double(), dim=-1)
    for i in range(1, n):
        assert lp["token_logprobs"][i] == pytest.approx(float(logp[i - 1, ids[i]]), abs=2e-4)
        top = lp["top_logprobs"][i]
        assert len(top) <= 2 and max(top.values()) == pytest.approx(float(logp[i - 1].max()),
                                                                    abs=2e-4)
    assert any(t.startswith("bytes:\\x") for t in lp["tokens"][:n])  # the split "é"


def _sse_chunks(server, path, body):
    chunks, done = [], False
    with httpx.stream("POST", f"{server.base_url}{path}", json=body, timeout=120) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: "):
                if line == "data: [DONE]":
                    done = True
                    continue
                chunks.append(json.loads(line[6:]))
    assert done
    return chunks


def test_stream_reassembles_to_the_non_streamed_text(server):
    body = {"prompt": PROMPT, "max_tokens": 6, "temperature": 0}
    whole = _post(server, "/completions", body).json()["choices"][0]["text"]
    chunks = _sse_chunks(server, "/completions",
                         {**body, "stream": True, "stream_options": {"include_usage": True}})
    text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
    assert text == whole
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 6
    finals = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finals[-1] == "length" and all(f is None for f in finals[:-1])


def test_chat_uses_the_template_and_streams_logprobs(server):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}]
    chat = _post(server, "/chat/completions", {"messages": messages, "max_tokens": 4,
                                               "temperature": 0, "logprobs": True,
                                               "top_logprobs": 3}).json()
    plain = _post(server, "/completions", {
        "prompt": "System: Be brief.\n\nUser: Hi?\n\nAssistant:", "max_tokens": 4,
        "temperature": 0}).json()
    choice = chat["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": plain["choices"][0]["text"]}
    content = choice["logprobs"]["content"]
    assert len(content) == 4 and all(len(e["top_logprobs"]) == 3 for e in content)
    assert all(e["top_logprobs"][0]["logprob"] == pytest.approx(e["logprob"]) for e in content)
    chunks = _sse_chunks(server, "/chat/completions", {"messages": messages, "max_tokens": 4,
                                                       "temperature": 0, "stream": True})
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert streamed == choice["message"]["content"]


def test_bad_requests_are_one_line_4xx_and_the_server_keeps_serving(server):
    cases = [
        (httpx.post(f"{server.base_url}/completions", content=b"{not json",
                    headers={"content-type": "application/json"}), 400, "invalid JSON"),
        (_post(server, "/completions", {"prompt": "x", "max_tokens": 1,
                                        "response_format": {"type": "json_object"}}),
         400, "response_format: type 'json_object' cannot be honoured"),
        (_post(server, "/completions", {"prompt": "x", "max_tokens": -1}), 400, "max_tokens"),
        (_post(server, "/completions", {"prompt": "x", "n": 0}), 400, "n"),
        (_post(server, "/completions", {"prompt": "x" * 65600, "max_tokens": 1}), 400,
         "maximum context length is 65536"),
        (_post(server, "/completions", {"model": "gpt-9", "prompt": "x"}), 404, "gpt-9"),
        (_post(server, "/chat/completions", {"messages": [{"role": "robot", "content": "x"}]}),
         400, "role"),
        (_post(server, "/completions", {"prompt": "x", "stop": [""]}), 400, "non-empty"),
    ]
    for reply, status, fragment in cases:
        assert reply.status_code == status, reply.text
        message = reply.json()["error"]["message"]
        assert fragment in message and "\n" not in message
    # ignore_eos: sampled from random weights, an end-of-text token could come first
    ok = _post(server, "/completions", {"prompt": "still here?", "max_tokens": 2, "ignore_eos": True})
    assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 2


def test_concurrent_clients_are_batched_and_each_gets_its_own_greedy_answer(server, reference):
    prompts = ["One", "Two words", "Three more words", "Four: a, b, c", "Five"]
    with ThreadPoolExecutor(5) as pool:
        replies = list(pool.map(lambda p: _post(server, "/completions", {
            "prompt": p, "max_tokens": 3, "temperature": 0}).json(), prompts))
    want = reference.generate([GenerateRequest(prompt=p, max_tokens=3) for p in prompts])
    assert [r["choices"][0]["text"] for r in replies] == [w.text for w in want]
