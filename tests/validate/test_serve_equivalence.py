"""The same requests through the in-process ``builtin`` engine and through the
``openai`` engine against ``v41val serve`` (a real uvicorn on loopback) give the same
greedy tokens (and seeded samples), finish reasons and loglikelihoods."""

from __future__ import annotations

import asyncio

import pytest

from runtime.options import RuntimeOptions
from tasks.request import ChatMessage, GenerationParams, Request
from validate.engines.base import EngineResult
from validate.engines.builtin import BuiltinEngine, BuiltinEngineConfig
from validate.engines.builtin_serve import BackgroundServer, ServeConfig
from validate.engines.builtin_source import ModelSource, WeightsPool
from validate.engines.openai import OpenAIEngine
from validate.engines.openai_config import OpenAIEngineConfig

SOURCE = ModelSource.micro(seed=3)


def _requests():
    gen = GenerationParams(max_gen_toks=6, until=("\n\n",))
    return [
        Request("toy", "a", "generate", prompt="Question: 1 + 1 =", gen=gen),
        Request("toy", "b", "generate", prompt="Write a word:", gen=gen),
        Request("toy", "c", "generate", messages=(ChatMessage("user", "Hello?"),), gen=gen),
        Request("toy", "s", "generate", prompt="Sample me:",
                gen=GenerationParams(max_gen_toks=6, do_sample=True, temperature=0.8, seed=11)),
        Request("toy", "d", "loglikelihood", prompt="The sky is ",
                continuations=("blue", " green", "(C) red")),
    ]


def _collect(engine, requests):
    async def go():
        return {o.request.item_id: o async for o in engine.stream(requests)}
    return asyncio.run(go())


@pytest.mark.parametrize("swa", ["exact", "bounded"])
def test_builtin_and_served_runtime_agree(swa):
    pool = WeightsPool()
    options = RuntimeOptions(swa=swa)
    local = _collect(BuiltinEngine(BuiltinEngineConfig(source=SOURCE, options=options), pool),
                     _requests())
    with BackgroundServer(ServeConfig(source=SOURCE, options=options), pool) as server:
        client = OpenAIEngine(OpenAIEngineConfig(base_url=server.base_url,
                                                 model=server.model_name, concurrency=4,
                                                 timeout_s=120))
        remote = _collect(client, _requests())
    assert set(local) == set(remote) == {"a", "b", "c", "d", "s"}
    for item in "abcs":  # greedy, chat and seeded sampling alike
        here, there = local[item], remote[item]
        assert isinstance(here, EngineResult) and isinstance(there, EngineResult)
        assert here.response.text == there.response.text
        assert here.response.finish_reason == there.response.finish_reason
        assert here.response.n_output_tokens == there.response.n_output_tokens
        assert there.timings.ttft_s is not None and there.timings.n_prompt_tokens == \
            here.timings.n_prompt_tokens
    ll_here, ll_there = local["d"].response, remote["d"].response
    assert ll_here.values == pytest.approx(ll_there.values, abs=1e-4)
    assert remote["d"].engine["continuation_tokens"] == local["d"].engine["continuation_tokens"]
