"""The public API: names, lookups, requests, scores and their errors."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

import tasks
from tasks.errors import ResponseShapeError, TaskConfigError, UnknownItemError, UnknownTaskError
from tasks.gsm8k import FEWSHOT_SEED, fewshot_draws
from tasks.request import Generation, Loglikelihoods

EXPECTED_NAMES = {
    "gsm8k", "gsm8k_cot", "gsm8k_cot_zeroshot", "gsm8k_chat_cot_zeroshot",
    *(f"gpqa_{s}_{v}" for s in ("diamond", "main", "extended")
      for v in ("zeroshot", "cot_zeroshot", "generative_n_shot", "chat_cot_zeroshot")),
    "testbed_lookup", "testbed_arith", "testbed_lookup_arith",
    *(f"testbed_probe_{c}" for c in (
        "suffix_wm1", "suffix_w", "suffix_wp1", "ratio_even", "ratio_odd", "replay_m1",
        "replay_0", "replay_p1", "chunk", "hit_aligned", "hit_unaligned")),
}


def test_names_and_versions():
    assert set(tasks.names()) == EXPECTED_NAMES
    text = (Path(tasks.__file__).parent / "CHANGELOG.md").read_text(encoding="utf-8")
    for name in tasks.names():
        task = tasks.get(name)
        assert task.name == name
        assert f"`{name}` {task.version}" in text, name


def test_unknown_names_are_lookup_errors():
    with pytest.raises(UnknownTaskError, match="unknown task 'gsm9k'"):
        tasks.get("gsm9k")
    with pytest.raises(UnknownItemError, match="gsm8k-test-9999"):
        tasks.get("gsm8k").item("gsm8k-test-9999")


def test_items_are_frozen_with_stable_ids():
    task = tasks.get("gsm8k")
    item = task.item("gsm8k-test-0042")
    assert item.index == 42 and item is task.items()[42]
    with pytest.raises(dataclasses.FrozenInstanceError):
        item.target = "1"  # type: ignore[misc]
    assert item.target.endswith(f"#### {item.final_answer}")
    assert tasks.get("gsm8k_cot").item("gsm8k-test-0042").target == item.final_answer


def test_fewshot_draws_follow_one_seeded_rng_in_document_order():
    # Restated: one Random(1234).sample(population, 5) call per document, in order.
    rng = random.Random(1234)
    population = list(range(7473))
    expected = [tuple(rng.sample(population, 5)) for _ in range(20)]
    assert list(fewshot_draws(1319, 7473, 5, FEWSHOT_SEED)[:20]) == expected


def test_requests_carry_explicit_generation_budget():
    for name in tasks.names():
        task = tasks.get(name)
        request = task.render(task.items()[0])
        assert request.task == name and request.item_id == task.items()[0].id
        if task.kind == "loglikelihood":
            assert request.gen is None and task.max_gen_toks is None
            assert request.continuations == (" (A)", " (B)", " (C)", " (D)")
        else:
            # The testbed's one-line worked answers need far less than 256 tokens.
            budget = 64 if name.startswith("testbed_") else 256
            assert request.gen.max_gen_toks == task.max_gen_toks >= budget
            assert request.gen.do_sample is False and request.gen.temperature == 0.0
        assert (request.messages is not None) == task.is_chat


def test_max_gen_toks_override():
    task = tasks.get("gsm8k_cot", max_gen_toks=64)
    assert task.render(task.items()[0]).gen.max_gen_toks == 64
    with pytest.raises(TaskConfigError):
        tasks.get("gpqa_diamond_zeroshot", max_gen_toks=64)
    with pytest.raises(TaskConfigError):
        tasks.get("gsm8k", max_gen_toks=0)


def test_score_shapes_and_invalid_flag():
    task = tasks.get("gsm8k")
    item = task.items()[0]
    score = task.score(item, Generation("no digits here"))
    assert score.invalid and score.value == 0.0 and score.primary == "strict-match"
    assert score.extracted == {"strict-match": "[invalid]", "flexible-extract": "[invalid]"}
    good = task.score(item, Generation(f"#### {item.final_answer}"))
    assert good.values == {"strict-match": 1.0, "flexible-extract": 1.0} and not good.invalid
    with pytest.raises(ResponseShapeError):
        task.score(item, Loglikelihoods((0.0, 1.0)))
    null = tasks.get("gsm8k_chat_cot_zeroshot")
    assert null.score(null.items()[0], Generation(None)).invalid  # type: ignore[arg-type]
    mc = tasks.get("gpqa_diamond_zeroshot")
    with pytest.raises(ResponseShapeError):
        mc.score(mc.items()[0], Loglikelihoods((0.0, 1.0)))
    with pytest.raises(ResponseShapeError):
        mc.score(mc.items()[0], Generation("(A)"))


def test_items_of_another_task_are_refused():
    cot = tasks.get("gsm8k_cot")
    base_item = tasks.get("gsm8k").items()[0]  # same id, different target
    with pytest.raises(UnknownItemError):
        cot.render(base_item)
    with pytest.raises(UnknownItemError):
        cot.score(base_item, Generation("The answer is 1."))


def test_chat_reply_with_unfinished_reasoning_is_invalid():
    task = tasks.get("gsm8k_chat_cot_zeroshot")
    item = task.items()[0]
    cut = task.score(item, Generation(f"<think>so it is {item.final_answer}"))
    assert cut.invalid and set(cut.values.values()) == {0.0}
    done = task.score(item, Generation(f"<think>hmm</think>\nThe final answer is "
                                       f"${item.final_answer}."))
    assert done.values == {"strict-match": 1.0, "flexible-extract": 1.0}



def test_oracle_verdicts_for_every_gpqa_subset():
    """Gold and wrong oracles, written here independently of tasks.oracles."""
    for subset, size in (("diamond", 198), ("main", 448), ("extended", 546)):
        gen = tasks.get(f"gpqa_{subset}_cot_zeroshot")
        mc = tasks.get(f"gpqa_{subset}_zeroshot")
        assert len(gen.items()) == len(mc.items()) == size
        for item, mc_item in zip(gen.items(), mc.items(), strict=True):
            gold, wrong = item.target[1], "ABCD"[(item.answer_index + 2) % 4]
            assert set(gen.score(item, Generation(f"The answer is ({gold}).")).values.values()) \
                == {1.0}
            assert set(gen.score(item, Generation(f"So: the answer is ({wrong})")).values.values()) \
                == {0.0}
            lls = [-5.0] * 4
            lls[mc_item.answer_index] = -1.0
            assert mc.score(mc_item, Loglikelihoods(tuple(lls))).value == 1.0
            lls[(mc_item.answer_index + 1) % 4] = 0.0
            assert mc.score(mc_item, Loglikelihoods(tuple(lls))).value == 0.0
