"""``v41val serve`` through the real ``openai`` Python client (micro model, real uvicorn
on loopback), checked against independent references: the runtime engine for greedy
text, a float64 log-softmax of one full forward for logprobs, penalties recomputed in
float64 from teacher-forced logits, the tokenizer itself for /tokenize and /detokenize,
Jinja for the served chat template."""

from __future__ import annotations

import logging
from collections import Counter

import httpx
import pytest
import torch

openai = pytest.importorskip("openai")

from runtime.engine.engine import Engine  # noqa: E402
from runtime.engine.requests import GenerateRequest  # noqa: E402
from runtime.model import SeqChunk, V41Model  # noqa: E402
from runtime.options import RuntimeOptions  # noqa: E402
from runtime.server.chat_template import render_chat  # noqa: E402
from validate.engines.builtin_source import ModelSource  # noqa: E402

SOURCE = ModelSource.micro(seed=5)
NAME = "v41val-micro"
PROMPT = "Question: what is 6 times 7?\nAnswer:"


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def tok():
    return SOURCE.tokenizer()


@pytest.fixture(scope="module")
def model(pool):
    return V41Model(pool.weights(SOURCE), RuntimeOptions())


@pytest.fixture(scope="module")
def reference(model, tok):
    return Engine(model, tok)


def _greedy(reference, **kw):
    return reference.generate_one(GenerateRequest(temperature=0.0, **kw))


def _full_logits(model, ids) -> torch.Tensor:
    """float64 logits of every position of ``ids`` from one cold forward."""
    out = model.forward([SeqChunk(model.new_state(), torch.tensor(list(ids)), "all")])
    return out[0].logits.double()


def _token_id(tok, text: str) -> int:
    """The id behind one token string of the server (the micro tokenizer has no merges)."""
    if text.startswith("token_id:"):
        return int(text[len("token_id:"):])
    specials = {tok.special_text(i): i for i in range(tok.vocab_size)
                if tok.special_text(i) is not None}
    if text in specials:
        return specials[text]
    raw = bytes.fromhex(text[6:].replace("\\x", "")) if text.startswith("bytes:") else \
        text.encode()
    assert len(raw) == 1, text
    return next(i for i in range(tok.vocab_size) if i not in specials.values()
                and tok.token_bytes(i) == raw)


def test_completions_and_stream_equal_the_engine(client, reference):
    want = _greedy(reference, prompt=PROMPT, max_tokens=6)
    reply = client.completions.create(model=NAME, prompt=PROMPT, max_tokens=6, temperature=0,
                                      suffix=None)
    assert reply.choices[0].text == want.text and reply.usage.completion_tokens == 6
    stream = client.completions.create(model=NAME, prompt=PROMPT, max_tokens=6, temperature=0,
                                       stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert "".join(c.choices[0].text for c in chunks if c.choices) == want.text
    assert chunks[-1].usage.completion_tokens == 6


def test_chat_parts_and_developer_role_equal_plain_system_messages(client):
    plain = [{"role": "system", "content": "Be brief.\nVery."},
             {"role": "user", "content": "Hi?"}]
    parts = [{"role": "developer", "content": [{"type": "text", "text": "Be brief."},
                                               {"type": "text", "text": "Very."}]},
             {"role": "user", "content": [{"type": "text", "text": "Hi?"}]}]
    a = client.chat.completions.create(model=NAME, messages=plain, max_tokens=5, temperature=0)
    b = client.chat.completions.create(model=NAME, messages=parts, max_tokens=5, temperature=0,
                                       response_format={"type": "text"})
    assert a.choices[0].message.content == b.choices[0].message.content
    streamed = client.chat.completions.create(model=NAME, messages=parts, max_tokens=5,
                                              temperature=0, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
    assert text == a.choices[0].message.content
    with pytest.raises(openai.BadRequestError, match="image_url"):
        client.chat.completions.create(model=NAME, max_tokens=1, messages=[
            {"role": "user", "content": [{"type": "image_url",
                                          "image_url": {"url": "http://x/y.png"}}]}])


def test_n_choices_follow_vllm_seeds_and_are_independent(client):
    kw = dict(model=NAME, prompt=PROMPT, max_tokens=8, temperature=1.0)
    two = client.completions.create(n=2, seed=11, **kw)
    alone = [client.completions.create(n=1, seed=s, **kw).choices[0].text for s in (11, 12)]
    assert [c.index for c in two.choices] == [0, 1]
    assert [c.text for c in two.choices] == alone  # choice j uses seed + j
    assert two.usage.completion_tokens == 16 and two.usage.prompt_tokens == len(
        SOURCE.tokenizer().encode(PROMPT))
    # fresh seeds, not copies; compared by the sampled tokens' logprobs, since texts alone can
    # coincide: the micro model's invalid UTF-8 bytes all print as U+FFFD (one CI run drew two
    # different choices that both read as three of them)
    unseeded = client.completions.create(n=3, logprobs=0, **kw)
    assert len({tuple(c.logprobs.token_logprobs) for c in unseeded.choices}) == 3
    chunks = list(client.chat.completions.create(
        model=NAME, messages=[{"role": "user", "content": "Hi"}], max_tokens=4, n=2, seed=3,
        temperature=1.0, stream=True))
    texts = {0: "", 1: ""}
    for c in chunks:
        for ch in c.choices:
            texts[ch.index] += ch.delta.content or ""
    whole = client.chat.completions.create(model=NAME, messages=[{"role": "user",
                                                                   "content": "Hi"}],
                                           max_tokens=4, n=2, seed=3, temperature=1.0)
    assert [texts[0], texts[1]] == [c.message.content for c in whole.choices]


def test_top_logprobs_have_the_requested_count_and_equal_float64(client, model, tok):
    reply = client.completions.create(model=NAME, prompt=PROMPT, max_tokens=4, temperature=0,
                                      logprobs=3)
    lp = reply.choices[0].logprobs
    ids = [_token_id(tok, t) for t in lp.tokens]
    logits = _full_logits(model, tok.encode(PROMPT) + ids[:-1])
    n_prompt = len(tok.encode(PROMPT))
    for step, top in enumerate(lp.top_logprobs):
        assert len(top) == 3, top  # byte-less ids used to collide as ''
        logp = torch.log_softmax(logits[n_prompt - 1 + step], -1)
        want = torch.topk(logp, 3)
        assert {_token_id(tok, k) for k in top} == {int(i) for i in want.indices}
        assert sorted(top.values(), reverse=True) == pytest.approx(
            [float(v) for v in want.values], abs=2e-4)
        assert lp.token_logprobs[step] == pytest.approx(float(logp[ids[step]]), abs=2e-4)
    chat = client.chat.completions.create(model=NAME, messages=[{"role": "user", "content": "x"}],
                                          max_tokens=3, temperature=0, logprobs=True,
                                          top_logprobs=3)
    assert all(len(e.top_logprobs) == 3 for e in chat.choices[0].logprobs.content)


def test_token_id_and_batched_prompts(client, reference, tok):
    prompts = ["One", "Two words", "Three more words"]
    want = [_greedy(reference, prompt=p, max_tokens=3).text for p in prompts]
    batched = client.completions.create(model=NAME, prompt=prompts, max_tokens=3, temperature=0)
    assert [c.text for c in sorted(batched.choices, key=lambda c: c.index)] == want
    one_ids = client.completions.create(model=NAME, prompt=tok.encode(prompts[1]), max_tokens=3,
                                        temperature=0)
    assert one_ids.choices[0].text == want[1]
    lists = client.completions.create(model=NAME, prompt=[tok.encode(p) for p in prompts],
                                      max_tokens=3, temperature=0, n=2)
    assert [c.index for c in lists.choices] == list(range(6))
    assert [c.text for c in lists.choices] == [w for w in want for _ in range(2)]
    echoed = client.completions.create(model=NAME, prompt=tok.encode("Echo me"), max_tokens=1,
                                       temperature=0, echo=True)
    assert echoed.choices[0].text.startswith("Echo me")
    streamed = client.completions.create(model=NAME, prompt="Echo me", max_tokens=1,
                                         temperature=0, echo=True, stream=True)
    assert "".join(c.choices[0].text for c in streamed if c.choices) == echoed.choices[0].text
    with pytest.raises(openai.BadRequestError, match="outside the vocabulary"):
        client.completions.create(model=NAME, prompt=[5, 10**6], max_tokens=1)


def test_penalties_equal_a_float64_recompute_of_teacher_forced_logits(client, model, tok):
    rep, freq, pres = 1.4, 0.6, 0.4
    prompt = tok.encode(PROMPT)
    # a bias makes a prompt token the favourite, so the penalties have repeats to act on
    first = _full_logits(model, prompt)[-1]
    favourite = tok.encode(" ")[0]
    bias = float(first.max() - first[favourite]) + 0.3
    common = dict(model=NAME, prompt=PROMPT, max_tokens=10, temperature=0, logprobs=0,
                  logit_bias={str(favourite): bias})
    reply = client.completions.create(
        frequency_penalty=freq, presence_penalty=pres,
        extra_body={"repetition_penalty": rep, "ignore_eos": True}, **common)
    biased = client.completions.create(extra_body={"ignore_eos": True}, **common)
    out = [_token_id(tok, t) for t in reply.choices[0].logprobs.tokens]
    assert out != [_token_id(tok, t) for t in biased.choices[0].logprobs.tokens]
    logits = _full_logits(model, prompt + out[:-1])
    checked = 0
    for step, token in enumerate(out):
        z = logits[len(prompt) - 1 + step].clone()
        z[favourite] += bias
        for t in set(prompt) | set(out[:step]):
            z[t] = z[t] / rep if z[t] > 0 else z[t] * rep
        for t, c in Counter(out[:step]).items():
            z[t] -= freq * c + pres
        top2 = torch.topk(z, 2).values
        if float(top2[0] - top2[1]) > 1e-4:  # a near tie may go either way in float32
            assert token == int(torch.argmax(z)), step
            checked += 1
    assert checked >= 8
    zero = client.completions.create(model=NAME, prompt=PROMPT, max_tokens=6, temperature=0,
                                     frequency_penalty=0, presence_penalty=0,
                                     extra_body={"repetition_penalty": 1.0})
    plain = client.completions.create(model=NAME, prompt=PROMPT, max_tokens=6, temperature=0)
    assert zero.choices[0].text == plain.choices[0].text


def test_logit_bias_min_tokens_and_stop_string_kept(client, model, tok):
    prompt = tok.encode(PROMPT)
    row = torch.log_softmax(_full_logits(model, prompt)[-1], -1)
    best, second = (int(i) for i in torch.topk(row, 2).indices)
    empty = client.completions.create(model=NAME, prompt=PROMPT, max_tokens=1, temperature=0,
                                      logit_bias={}, logprobs=0)
    banned = client.completions.create(model=NAME, prompt=PROMPT, max_tokens=1, temperature=0,
                                       logit_bias={str(best): -100}, logprobs=0)
    assert _token_id(tok, empty.choices[0].logprobs.tokens[0]) == best
    assert _token_id(tok, banned.choices[0].logprobs.tokens[0]) == second
    eos = str(tok.eos_id)
    held = client.completions.create(model=NAME, prompt=PROMPT, max_tokens=8, temperature=0,
                                     logit_bias={eos: 100}, extra_body={"min_tokens": 3})
    assert held.usage.completion_tokens == 4 and held.choices[0].finish_reason == "stop"
    kept = client.completions.create(model=NAME, prompt="a b a b a b a", max_tokens=4,
                                     temperature=0, logit_bias={str(tok.encode(" ")[0]): 100},
                                     stop=[" "], extra_body={"include_stop_str_in_output": True})
    assert kept.choices[0].text == " "


def test_prompt_logprobs_equal_float64_with_vllm_ranks(server, model, tok):
    ids = tok.encode("Hello there")
    reply = httpx.post(f"{server.base_url}/completions", timeout=60, json={
        "prompt": ids, "max_tokens": 1, "temperature": 0, "prompt_logprobs": 2}).json()
    plp = reply["choices"][0]["prompt_logprobs"]
    assert plp[0] is None and len(plp) == len(ids)
    logp = torch.log_softmax(_full_logits(model, ids), -1)
    for pos in range(1, len(ids)):
        entry = plp[pos]
        mine = entry[str(ids[pos])]
        assert mine["logprob"] == pytest.approx(float(logp[pos - 1, ids[pos]]), abs=2e-4)
        assert mine["rank"] == int((logp[pos - 1] > logp[pos - 1, ids[pos]]).sum()) + 1
        top = torch.topk(logp[pos - 1], 2).indices.tolist()
        assert set(entry) == {str(ids[pos])} | {str(t) for t in top}


def test_unknown_fields_are_ignored_with_a_logged_warning(client, reference, caplog):
    with caplog.at_level(logging.WARNING, logger="v41val.serve"):
        reply = client.completions.create(model=NAME, prompt=PROMPT, max_tokens=3, temperature=0,
                                          extra_body={"frobnicate": 1, "priority": 0,
                                                      "stream_options_x": {}})
    assert reply.choices[0].text == _greedy(reference, prompt=PROMPT, max_tokens=3).text
    warned = [r.getMessage() for r in caplog.records if r.name == "v41val.serve"]
    assert any("frobnicate" in m and "priority" in m for m in warned)
    for body, fragment in ((({"use_beam_search": True}), "use_beam_search"),
                           ({"guided_json": {"type": "object"}}, "guided_json"),
                           ({"min_p": 1.5}, "min_p")):
        with pytest.raises(openai.BadRequestError, match=fragment):
            client.completions.create(model=NAME, prompt="x", max_tokens=1, extra_body=body)
    with pytest.raises(openai.BadRequestError, match="json_object"):
        client.chat.completions.create(model=NAME, messages=[{"role": "user", "content": "x"}],
                                       max_tokens=1, response_format={"type": "json_object"})
    with pytest.raises(openai.BadRequestError, match="suffix"):
        client.completions.create(model=NAME, prompt="x", max_tokens=1, suffix="y")
    with pytest.raises(openai.BadRequestError, match="min_tokens"):
        client.completions.create(model=NAME, prompt="x", max_tokens=1,
                                  extra_body={"min_tokens": 2})
    nulls = httpx.post(f"{client.base_url}completions", timeout=60, json={
        "prompt": PROMPT, "max_tokens": 3, "temperature": 0, "top_p": None, "n": None,
        "presence_penalty": None, "seed": None, "stop": None, "logit_bias": None}).json()
    assert nulls["choices"][0]["text"] == reply.choices[0].text  # null = the default


def test_vllm_routes(server, client, tok):
    root = server.root
    assert httpx.get(f"{root}/version").json()["version"]
    assert httpx.get(f"{root}/ping").status_code == 200
    assert httpx.post(f"{root}/ping").status_code == 200
    text = "Tokenize me, général"
    got = httpx.post(f"{root}/tokenize", json={"model": NAME, "prompt": text,
                                               "return_token_strs": True}).json()
    assert got["tokens"] == tok.encode(text) and got["count"] == len(got["tokens"])
    assert got["max_model_len"] == 65536 and len(got["token_strs"]) == got["count"]
    msgs = [{"role": "user", "content": "Hi"}]
    chat = httpx.post(f"{root}/tokenize", json={"messages": msgs}).json()
    assert chat["tokens"] == tok.encode(render_chat([("user", "Hi")]))
    back = httpx.post(f"{root}/detokenize", json={"tokens": got["tokens"]}).json()
    assert back["prompt"] == tok.decode(got["tokens"]) == text
    assert httpx.post(f"{root}/detokenize", json={"tokens": [10**6]}).status_code == 400
    info = httpx.get(f"{root}/tokenizer_info").json()
    assert (info["eos_token"], info["eos_token_id"]) == ("<|eos|>", tok.eos_id)
    assert info["bos_token"] == "<|bos|>" and info["vocab_size"] == tok.vocab_size
    jinja2 = pytest.importorskip("jinja2")
    msgs = [{"role": "developer", "content": "Be {{x}} brief."}, {"role": "user", "content": "Q"},
            {"role": "assistant", "content": "A"}, {"role": "user", "content": "Q2\n"}]
    template = jinja2.Environment().from_string(info["chat_template"])
    for gen in (True, False):
        assert template.render(messages=msgs, add_generation_prompt=gen) == render_chat(
            [(m["role"], m["content"]) for m in msgs], gen)
    assert client.models.retrieve(NAME).id == NAME
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-9")
