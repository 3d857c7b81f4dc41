"""Fidelity over HTTP (top-k approximation) against two ``v41val serve`` instances on
loopback, checked against the exact full-vocabulary KL of the same two variants in
process: the approximation is never above the exact value, is exactly zero for a
variant against itself, and grows with a planted degradation."""

from __future__ import annotations

import asyncio

import pytest

from tasks.request import GenerationParams, Request
from validate.engines.builtin import BuiltinEngine, BuiltinEngineConfig
from validate.engines.builtin_serve import BackgroundServer, ServeConfig
from validate.engines.builtin_source import ModelSource, WeightsPool
from validate.engines.openai import OpenAIEngine
from validate.engines.openai_config import OpenAIEngineConfig
from validate.fidelity.collect import topk_fidelity
from validate.fidelity.metrics import kl_per_token
from validate.fidelity.summary import summarize, topk_method
from validate.perturb import Perturbation

SOURCE = ModelSource.micro(seed=5)
NOISE = Perturbation(logit_noise=1.0, seed=3)


def _requests():
    return [Request("toy", f"g{k}", "generate", prompt=p, gen=GenerationParams(max_gen_toks=4))
            for k, p in enumerate(["Say something:", "Count: 1, 2,"])]


def _client(server):
    return OpenAIEngine(OpenAIEngineConfig(base_url=server.base_url, model=server.model_name,
                                           timeout_s=120))


@pytest.mark.slow
def test_topk_fidelity_is_a_lower_bound_of_the_exact_kl():
    pool = WeightsPool()
    base_cfg = ServeConfig(source=SOURCE)
    noisy_cfg = ServeConfig(source=SOURCE, perturb=NOISE)
    with BackgroundServer(base_cfg, pool) as base_srv, \
            BackgroundServer(noisy_cfg, pool) as noisy_srv:
        same = asyncio.run(topk_fidelity(_client(base_srv), _client(base_srv), _requests(),
                                         top_k=3))
        http = asyncio.run(topk_fidelity(_client(base_srv), _client(noisy_srv), _requests(),
                                         top_k=3))
    # The exact reference forces the very tokens the HTTP path scored: the server
    # re-tokenizes prompt + the baseline's text (a random byte-level model writes
    # invalid UTF-8, whose U+FFFD re-encodes to more tokens than were generated).
    base = BuiltinEngine(BuiltinEngineConfig(source=SOURCE), pool)
    noisy = BuiltinEngine(BuiltinEngineConfig(source=SOURCE, perturb=NOISE), pool)
    tok = base.tokenizer
    texts = {o.request.item_id: (o.request.prompt, o.response.text)
             for o in base.run(_requests())}
    assert summarize(same, topk_method(3)).kl_mean == pytest.approx(0.0, abs=1e-9)
    assert {r.item_id for r in http} == set(texts)
    exact_kl = []
    for record in http:
        prompt, text = texts[record.item_id]
        prompt_ids = tok.encode(prompt)
        forced = tok.encode(prompt + text)[len(prompt_ids):]
        full = kl_per_token(base.teacher_forced([prompt_ids], [forced])[0],
                            noisy.teacher_forced([prompt_ids], [forced])[0])
        assert len(record.kl) == len(full)
        for approx, exact in zip(record.kl, full, strict=True):
            assert approx <= exact + 1e-4
        exact_kl += list(full)
    s_http = summarize(http, topk_method(3))
    assert 0 < s_http.kl_mean <= sum(exact_kl) / len(exact_kl) + 1e-4
    assert s_http.method == "top-k approx k=3 (lower bound)"
