"""The sampler's logit adjustments (``runtime.engine.penalties``) against an independent
float64 recompute from the engine's own raw logits: greedy with vLLM's repetition
penalty and OpenAI's frequency/presence penalties chooses the argmax of the recomputed
row at every step; the no-op values change nothing; ``min_tokens`` keeps EOS out until
then even when a bias makes it the argmax; ``include_stop_str_in_output`` keeps the stop
string. The micro model (4 layers), CPU float32."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from runtime.engine.engine import Engine
from runtime.engine.errors import EngineError
from runtime.engine.requests import GenerateRequest
from runtime.model import V41Model
from runtime.options import RuntimeOptions
from validate.engines.builtin_source import ModelSource

SOURCE = ModelSource.micro(seed=4)
PROMPT = "the cat sat on the mat, the cat sat on the"


@pytest.fixture(scope="module")
def engine():
    return Engine(V41Model(SOURCE.load(), RuntimeOptions()), SOURCE.tokenizer())


def _recompute(raw: torch.Tensor, prompt: list[int], out: list[int], bias: dict[int, float],
               rep: float, freq: float, pres: float) -> torch.Tensor:
    """OpenAI's logit bias and vLLM's penalties written out element by element, in float64."""
    z = raw.double().clone()
    for t, b in bias.items():
        z[t] += b
    for t in set(prompt) | set(out):
        z[t] = z[t] / rep if z[t] > 0 else z[t] * rep
    for t, c in Counter(out).items():
        z[t] -= freq * c + pres
    return z


@pytest.mark.parametrize("rep,freq,pres", [(1.6, 0.0, 0.0), (1.0, 0.7, 0.3), (1.3, -0.4, 1.1)])
def test_greedy_with_penalties_takes_the_argmax_of_the_recomputed_row(engine, rep, freq, pres):
    # a bias makes one prompt token the favourite, so the penalties have repeats to act on
    favourite = SOURCE.tokenizer().encode("t")[0]
    first = engine.generate_one(GenerateRequest(prompt=PROMPT, max_tokens=1,
                                                return_logits=True)).logits[0]
    bias = {favourite: float(first.max() - first[favourite]) + 0.3}
    req = GenerateRequest(prompt=PROMPT, max_tokens=12, ignore_eos=True, return_logits=True,
                          logit_bias=tuple(bias.items()), repetition_penalty=rep,
                          frequency_penalty=freq, presence_penalty=pres)
    result = engine.generate_one(req)
    prompt, out = list(result.prompt_ids), list(result.token_ids)
    changed = 0
    for step, token in enumerate(out):
        z = _recompute(result.logits[step], prompt, out[:step], bias, rep, freq, pres)
        assert token == int(torch.argmax(z)), step
        changed += token != int(torch.argmax(_recompute(result.logits[step], [], [], bias,
                                                        1.0, 0.0, 0.0)))
    assert changed > 0  # the penalties did choose another token somewhere
    assert favourite in out


def test_no_op_values_change_nothing(engine):
    plain = engine.generate_one(GenerateRequest(prompt=PROMPT, max_tokens=8, ignore_eos=True))
    noop = engine.generate_one(GenerateRequest(prompt=PROMPT, max_tokens=8, ignore_eos=True,
                                               repetition_penalty=1.0, frequency_penalty=0.0,
                                               presence_penalty=0.0, logit_bias=()))
    assert noop.token_ids == plain.token_ids


def test_min_tokens_keeps_eos_out_until_then(engine):
    eos = SOURCE.tokenizer().eos_id
    free = engine.generate_one(GenerateRequest(prompt=PROMPT, max_tokens=10,
                                               logit_bias=((eos, 100.0),)))
    held = engine.generate_one(GenerateRequest(prompt=PROMPT, max_tokens=10, min_tokens=4,
                                               logit_bias=((eos, 100.0),)))
    assert free.token_ids == (eos,) and free.finish_reason == "stop"
    assert len(held.token_ids) == 5 and held.token_ids[-1] == eos
    assert eos not in held.token_ids[:4] and held.finish_reason == "stop"
    with pytest.raises(EngineError, match="min_tokens"):
        GenerateRequest(prompt="x", max_tokens=2, min_tokens=3)


def test_include_stop_str_in_output(engine):
    base = engine.generate_one(GenerateRequest(prompt=PROMPT, max_tokens=24, ignore_eos=True))
    text = base.text
    stop = next(text[i:i + 2] for i in range(2, len(text) - 2)
                if text[i:i + 2].isprintable() and text.find(text[i:i + 2]) == i)
    at = text.find(stop)
    cut = engine.generate_one(GenerateRequest(prompt=PROMPT, max_tokens=24, ignore_eos=True,
                                              stop=(stop,)))
    kept = engine.generate_one(GenerateRequest(prompt=PROMPT, max_tokens=24, ignore_eos=True,
                                               stop=(stop,), include_stop_str_in_output=True))
    assert cut.text == text[:at] and kept.text == text[:at + len(stop)]
    assert cut.finish_reason == kept.finish_reason == "stop"
