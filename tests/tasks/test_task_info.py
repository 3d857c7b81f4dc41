"""``tasks.info`` describes a task without reading its data; it must say exactly what the
loaded task says (the item counts are constants the loaders check the shipped files
against, so a data change that alters a count fails here and in the loader)."""

from __future__ import annotations

import pytest

import tasks


@pytest.mark.parametrize("name", tasks.names())
def test_info_equals_the_loaded_task(name):
    loaded = tasks.get(name)
    info = tasks.info(name)
    assert info.n_items == len(loaded.items())
    assert info.to_dict() == loaded.describe()


def test_info_counts_are_the_published_test_sets():
    counts = {name: tasks.info(name).n_items for name in tasks.names()}
    assert counts["gsm8k"] == 1319 and counts["gsm8k_chat_cot_zeroshot"] == 1319
    assert counts["gpqa_diamond_zeroshot"] == 198
    assert counts["gpqa_main_cot_zeroshot"] == 448
    assert counts["gpqa_extended_generative_n_shot"] == 546
    assert counts["testbed_arith"] == 1000


def test_info_honours_a_budget_override_and_refuses_it_for_multiple_choice():
    assert tasks.info("gsm8k_cot", max_gen_toks=12).max_gen_toks == 12
    with pytest.raises(tasks.errors.TaskConfigError):
        tasks.info("gpqa_diamond_zeroshot", max_gen_toks=12)
    with pytest.raises(tasks.errors.UnknownTaskError):
        tasks.info("no_such_task")
