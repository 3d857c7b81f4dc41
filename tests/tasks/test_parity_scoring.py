"""Scoring parity: for every generative task variant, a generated set of adversarial
responses gets exactly the same extracted answers and 0/1 verdicts from lm-eval
0.4.13's own filter and metric code as from ours.

The lm-eval side is built from lm-eval's installed YAMLs: its ``RegexFilter`` /
``MultiChoiceRegexFilter`` with the YAML's filter arguments, its
``exact_match_hf_evaluate`` with the YAML's metric arguments, and its model-side
post-processing ``postprocess_generated_text`` (stop strings; ``</think>`` for chat).
GPQA responses contain choice text, so failures are reported by ids and indices only.
"""

from __future__ import annotations

import math
import random

import pytest

import tasks
from tasks.extraction import INVALID, THINK_CLOSE, THINK_OPEN
from tasks.gpqa import GPQA_STYLES, GPQA_SUBSETS
from tasks.request import Generation, Loglikelihoods

GSM8K_NAMES = ["gsm8k", "gsm8k_cot", "gsm8k_cot_zeroshot", "gsm8k_chat_cot_zeroshot"]
GPQA_GENERATIVE = [f"gpqa_{s}_{style}" for s in GPQA_SUBSETS for style in GPQA_STYLES
                   if style != "zeroshot"]
N_ITEMS = 9


def _reference_text(response: str, until, chat: bool):
    """lm-eval's model-side post-processing; None where our documented policy applies
    (a chat reply whose ``<think>`` never closed is [invalid] under every filter)."""
    from lm_eval.models.utils import postprocess_generated_text

    if chat and THINK_OPEN in response and THINK_CLOSE not in response:
        return None
    return postprocess_generated_text(response, list(until), THINK_CLOSE if chat else None)


def _lm_eval_verdicts(lm_eval_ref, yaml_path, pairs, until, chat):
    """[(extracted per filter, value per filter)] from lm-eval's code, one per pair of
    (response, doc, target)."""
    config = lm_eval_ref.read_lm_eval_yaml(yaml_path)
    metric = lm_eval_ref.lm_eval_exact_match(config["metric_list"][0])
    texts = [_reference_text(resp, until, chat) for resp, _, _ in pairs]
    extracted_by_filter = {}
    for filter_config in config["filter_list"]:
        filt = lm_eval_ref.lm_eval_filter(filter_config)
        out = filt.apply([[t if t is not None else ""] for t in texts],
                         [doc for _, doc, _ in pairs])
        extracted_by_filter[filter_config["name"]] = [
            INVALID if t is None else o[0] for t, o in zip(texts, out, strict=True)]
    verdicts = []
    for k, (_, _, target) in enumerate(pairs):
        extracted = {name: values[k] for name, values in extracted_by_filter.items()}
        verdicts.append((extracted, {n: metric(e, target) for n, e in extracted.items()}))
    return verdicts


def _spread(items, n):
    step = max(1, len(items) // n)
    return list(items[::step][:n])


def _check_coverage(all_values, filter_names):
    """The set must exercise both verdicts and the invalid path of every filter."""
    for name in filter_names:
        vals = [v[0][name] for v in all_values]
        hits = sum(v[1][name] for v in all_values)
        assert 20 <= hits <= len(vals) - 20, (name, hits, len(vals))
        assert sum(x == INVALID for x in vals) >= 5, name


@pytest.mark.parametrize("name", GSM8K_NAMES)
def test_gsm8k_adversarial_verdicts_equal_lm_eval(name, lm_eval_ref, adversarial):
    task = tasks.get(name)
    rng = random.Random(f"adversarial-{name}")
    items = [it for it in task.items() if it.final_answer.lstrip("-").isdigit()]
    items = _spread(items, N_ITEMS)
    gold_targets = []
    pairs, owners = [], []
    for item in items:
        for response in adversarial.gsm8k_responses(item.final_answer, rng):
            pairs.append((response, {}, item.target))
            owners.append(item)
        gold_targets.append(item.target)
    assert len(pairs) >= 500
    yaml_path = f"gsm8k/{lm_eval_ref.GSM8K_YAMLS[name]}"
    theirs = _lm_eval_verdicts(lm_eval_ref, yaml_path, pairs, task.gen.until, task.is_chat)
    mismatches = []
    for k, ((response, _, _), item, (ext, val)) in enumerate(zip(pairs, owners, theirs,
                                                                  strict=True)):
        score = task.score(item, Generation(response))
        if score.extracted != ext or score.values != val:
            mismatches.append((item.id, k, response, score.extracted, ext))
    assert mismatches == [], f"{len(mismatches)} differ; first: {mismatches[:3]}"
    _check_coverage(theirs, task.filter_names)


@pytest.mark.parametrize("name", GPQA_GENERATIVE)
def test_gpqa_adversarial_verdicts_equal_lm_eval(name, lm_eval_ref, adversarial):
    task = tasks.get(name)
    style = name.split("_", 2)[2]
    rng = random.Random(f"adversarial-{name}")
    items = _spread(task.items(), N_ITEMS)
    pairs, owners = [], []
    for item in items:
        letter = item.target[1]
        wrong = "ABCD"[("ABCD".index(letter) + 1 + rng.randrange(3)) % 4]
        for response in adversarial.gpqa_responses(letter, wrong, list(item.choices), rng):
            pairs.append((response, {"choices": list(item.choices)}, item.target))
            owners.append(item)
    assert len(pairs) >= 500
    theirs = _lm_eval_verdicts(lm_eval_ref, f"gpqa/{lm_eval_ref.GPQA_YAMLS[style]}", pairs,
                               task.gen.until, task.is_chat)
    mismatches = []
    for k, ((response, _, _), item, (ext, val)) in enumerate(zip(pairs, owners, theirs,
                                                                  strict=True)):
        score = task.score(item, Generation(response))
        if score.extracted != ext or score.values != val:
            mismatches.append((item.id, k))  # ids and indices only, never text
    assert mismatches == [], f"{len(mismatches)} responses differ (item id, index): " \
                             f"{mismatches[:10]}"
    _check_coverage(theirs, task.filter_names)


def _first_argmax(values):
    """numpy.argmax written out: the first NaN if any, else the first maximum."""
    for k, v in enumerate(values):
        if math.isnan(v):
            return k
    best = max(values)
    return values.index(best)


@pytest.mark.parametrize("subset", GPQA_SUBSETS)
def test_gpqa_multiple_choice_scores_like_argmax(subset):
    task = tasks.get(f"gpqa_{subset}_zeroshot")
    rng = random.Random(subset)
    n_checked = 0
    for item in _spread(task.items(), 40):
        request = task.render(item)
        assert request.kind == "loglikelihood"
        assert request.continuations == (" (A)", " (B)", " (C)", " (D)")
        for case in range(15):
            lls = [-rng.choice([0.5, 1.0, 2.0, 7.25]) for _ in range(4)]
            if case == 0:
                lls = [-1.0] * 4  # full tie: the first choice wins
            if case == 1:
                lls[rng.randrange(4)] = float("nan")
            expected = _first_argmax(lls)
            score = task.score(item, Loglikelihoods(tuple(lls)))
            assert score.values["acc"] == float(expected == item.answer_index)
            assert score.values["acc_norm"] == score.values["acc"]
            assert score.extracted["acc"] == f"({'ABCD'[expected]})"
            assert score.invalid == any(math.isnan(v) for v in lls)
            n_checked += 1
    assert n_checked >= 500
