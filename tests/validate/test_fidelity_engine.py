"""Exact fidelity through the builtin engine (micro model): the teacher-forced rows are
the logits the engine itself used while generating; a variant against itself is
perfectly faithful; a planted logit noise is seen, more of it more clearly."""

from __future__ import annotations

import pytest
import torch

from runtime.engine.requests import GenerateRequest
from runtime.options import RuntimeOptions
from tasks.request import GenerationParams, Request
from validate.engines.builtin import BuiltinEngine, BuiltinEngineConfig, engine_for_plan
from validate.engines.builtin_source import ModelSource, WeightsPool
from validate.fidelity.collect import exact_fidelity
from validate.fidelity.summary import EXACT, summarize
from validate.perturb import Perturbation

SOURCE = ModelSource.micro(seed=1)
PROMPTS = ["Question: what is 3 + 4?\nAnswer:", "Name a colour:"]


@pytest.fixture(scope="module")
def pool():
    return WeightsPool()


@pytest.fixture(scope="module")
def base(pool):
    return BuiltinEngine(BuiltinEngineConfig(source=SOURCE, variant="base"), pool)


def _requests(n=4):
    gens = [Request("toy", f"g{k}", "generate", prompt=p,
                    gen=GenerationParams(max_gen_toks=n)) for k, p in enumerate(PROMPTS)]
    mc = Request("toy", "mc", "loglikelihood", prompt="Pick one: ", continuations=(" yes", " no"))
    return [*gens, mc]


def test_teacher_forced_rows_are_the_generation_logits(base):
    ids = list(base.tokenizer.encode(PROMPTS[0]))
    gen = base.runtime.generate([GenerateRequest(prompt_ids=ids, max_tokens=5,
                                                 return_logits=True, ignore_eos=True)])[0]
    rows = base.teacher_forced([ids], [gen.token_ids])[0]
    assert rows.shape == gen.logits.shape == (5, base.model.config.vocab_size)
    torch.testing.assert_close(rows, gen.logits, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_self_fidelity_is_perfect_and_planted_noise_is_seen(pool, base):
    same = BuiltinEngine(BuiltinEngineConfig(source=SOURCE, variant="same"), pool)
    records = exact_fidelity(base, same, _requests())
    labels = sorted(r.item_id for r in records)
    assert labels == ["g0", "g1", "mc#choice0", "mc#choice1"]
    s = summarize(records, EXACT)
    assert s.kl_mean == pytest.approx(0.0, abs=1e-9) and s.top1_agreement == 1.0
    assert s.n_diverged == 0 and s.n_tokens == 8 + sum(
        len(r.kl) for r in records if r.item_id.startswith("mc"))

    small = engine_for_plan({"preset": "micro", "seed": 1}, RuntimeOptions(),
                            perturb={"logit_noise": 0.05}, pool=pool)
    large = BuiltinEngine(BuiltinEngineConfig(source=SOURCE, perturb=Perturbation(
        logit_noise=2.0)), pool)
    assert small.weights is base.weights is large.weights
    s_small = summarize(exact_fidelity(base, small, _requests()), EXACT)
    s_large = summarize(exact_fidelity(base, large, _requests()), EXACT)
    assert 0 < s_small.kl_mean < s_large.kl_mean
    assert s_large.top1_agreement < 1.0 and s_large.n_diverged >= 1
    # N(0, s^2) noise on every logit: for small s, E[KL] ~ s^2/2 * (1 - sum p^2) <= s^2/2
    assert s_small.kl_mean < 0.05**2
