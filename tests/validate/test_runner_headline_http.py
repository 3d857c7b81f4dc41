"""``v41val run`` with a [speed] table on the openai engine, against a real HTTP server on
loopback (tests/validate/fake_openai_server.py, which answers 6-10 tokens per prompt, or
exactly ``max_tokens`` when the body carries vLLM's ``ignore_eos``).

Shown: every variant is swept through its endpoint after its quality pass; each level
really holds that many requests in flight at the server; with ``ignore_eos = true``
every sweep request produced ``max_tokens`` tokens (more than the server's natural
length, so the field was sent), with ``false`` none did; the stored headline equals
``validate.speed`` recomputed on the stored timings."""

from __future__ import annotations

import json

import pytest

from validate.plan import parse_plan
from validate.runner import run_plan
from validate.speed.headline import headline
from validate.speed.stored import sweep_from_record
from validate.store import ResultsStore

MAX_TOKENS = 12  # the fake server's natural answers have 6-10 tokens


def plan_doc(base_url: str, ignore_eos: bool) -> dict:
    return {"name": f"http-headline-{ignore_eos}", "baseline": "a", "fidelity_prompts": 0,
            "engine": {"kind": "openai", "base_url": base_url, "model": "fake"},
            "variants": {"a": {}, "b": {}},
            "tasks": [{"name": "gsm8k_cot_zeroshot", "limit": 1, "max_gen_toks": 3}],
            "speed": {"sweep_levels": [1, 4], "target_tokens_per_s": 1.0, "user_quantile": 0.25,
                      "prompt_tokens": 8, "max_tokens": MAX_TOKENS, "requests_per_level": 8,
                      "ignore_eos": ignore_eos}}


@pytest.mark.parametrize("ignore_eos", [True, False])
def test_openai_variants_are_swept_through_their_endpoint(tmp_path, fake_openai, ignore_eos):
    fake_openai.state.reset()
    plan = parse_plan(plan_doc(fake_openai.base_url, ignore_eos), "p.toml")
    with ResultsStore.open(tmp_path / "results.sqlite") as store:
        outcome = run_plan(plan, store)
        assert sorted(outcome.swept) == ["a", "b"]
        stored = {s.variant: s for s in store.sweeps(plan.hash)}
    assert sorted(stored) == ["a", "b"]
    # the highest level filled the server: 4 requests at once (the quality pass sends 1)
    assert fake_openai.state.max_in_flight == 4
    for name, s in stored.items():
        counts = [r["n_output_tokens"] for level in s.sweep["levels"] for r in level["requests"]]
        assert len(counts) == 2 * 8
        if ignore_eos:
            assert counts == [MAX_TOKENS] * len(counts)
        else:
            assert all(6 <= c <= 10 for c in counts), counts
        assert s.headline == json.loads(json.dumps(headline(sweep_from_record(s.sweep), name).to_dict()))
    assert stored["a"].comparison is None and stored["b"].comparison is not None
