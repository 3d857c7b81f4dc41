"""GPQA end to end through lm-eval 0.4.13 itself, given our fixed choice order.

lm-eval's installed GPQA YAMLs are loaded with two changes: the data comes from a
``custom_dataset`` callable that serves our items in memory (so nothing is written to
disk), and ``process_docs`` (lm-eval's unseeded shuffle, the one deliberate difference)
is dropped because the served docs already hold our permuted choices. Then lm-eval's
own requests and its own multiple-choice ``process_results`` are compared with ours.
Only hashes, ids and indices appear in assertion messages.
"""

from __future__ import annotations

import math
import random

import pytest
import yaml

import tasks
from tasks.request import Loglikelihoods, sha256_text

STYLES = ("zeroshot", "cot_zeroshot", "generative_n_shot")
SUBSET = "diamond"

LOADER = '''
def load(**kwargs):
    import datasets
    import tasks

    rows = []
    for item in tasks.get("gpqa_diamond_zeroshot").items():
        row = {"Record ID": item.id, "Question": item.question, "answer": item.target,
               "choices": list(item.choices)}
        row.update({f"choice{k + 1}": c for k, c in enumerate(item.choices)})
        rows.append(row)
    return datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)})
'''


@pytest.fixture(scope="module")
def lm_eval_gpqa(tmp_path_factory, lm_eval_ref):
    tmp = tmp_path_factory.mktemp("lm_eval_gpqa")
    include = tmp / "yamls"
    include.mkdir()
    (include / "gpqa_memory_loader.py").write_text(LOADER)
    for style in STYLES:
        config = lm_eval_ref.read_lm_eval_yaml(f"gpqa/{lm_eval_ref.GPQA_YAMLS[style]}")
        config.pop("process_docs")
        config.pop("tag", None)
        config["task"] = f"gpqa_{SUBSET}_{style}"
        config["dataset_name"] = f"gpqa_{SUBSET}"
        text = yaml.safe_dump(config, sort_keys=False)
        text += "custom_dataset: !function gpqa_memory_loader.load\n"
        (include / f"{config['task']}.yaml").write_text(text)
    with pytest.MonkeyPatch.context() as mp:
        lm_eval_ref.offline_env(mp, tmp)
        lm_eval_ref.cache_jinja_compilation(mp)
        loaded = lm_eval_ref.load_lm_eval_tasks(include, [f"gpqa_{SUBSET}_{s}" for s in STYLES])
        for task in loaded.values():
            task.build_all_requests(rank=0, world_size=1)
        yield loaded


@pytest.mark.parametrize("style", STYLES)
def test_requests_equal_lm_eval(style, lm_eval_gpqa):
    name = f"gpqa_{SUBSET}_{style}"
    theirs = lm_eval_gpqa[name]
    ours = tasks.get(name)
    by_doc: dict[int, list] = {}
    for inst in theirs.instances:
        by_doc.setdefault(inst.doc_id, []).append(inst)
    assert len(by_doc) == len(ours.items()) == 198
    bad = []
    for doc_id, item in enumerate(ours.items()):
        insts = sorted(by_doc[doc_id], key=lambda i: i.idx)
        assert insts[0].doc["Record ID"] == item.id
        request = ours.render(item)
        if request.prompt_sha256 != sha256_text(insts[0].args[0]):
            bad.append(item.id)
        if style == "zeroshot":
            assert tuple(i.args[1] for i in insts) == request.continuations
            assert all(i.args[0] == insts[0].args[0] for i in insts)
        else:
            gen_kwargs = insts[0].args[1]
            assert tuple(gen_kwargs["until"]) == request.gen.until
            assert float(gen_kwargs.get("temperature", 0.0)) == request.gen.temperature
            assert bool(gen_kwargs.get("do_sample", False)) is request.gen.do_sample
        assert str(theirs.doc_to_target(insts[0].doc)) == item.target
    assert bad == [], f"{len(bad)} prompts differ: {bad[:5]}"


def test_multiple_choice_scores_equal_lm_eval_process_results(lm_eval_gpqa):
    name = f"gpqa_{SUBSET}_zeroshot"
    theirs = lm_eval_gpqa[name]
    ours = tasks.get(name)
    docs = {inst.doc_id: inst.doc for inst in theirs.instances}
    rng = random.Random(7)
    n = 0
    for doc_id, item in enumerate(ours.items()):
        for case in range(4):
            lls = [-rng.choice([0.25, 1.0, 3.5]) for _ in range(4)]
            if case == 0:
                lls = [-2.0] * 4
            if case == 1 and doc_id % 5 == 0:
                lls[rng.randrange(4)] = math.nan
            expected = theirs.process_results(docs[doc_id], [(v, False) for v in lls])
            score = ours.score(item, Loglikelihoods(tuple(lls)))
            assert score.values == {"acc": expected["acc"], "acc_norm": expected["acc_norm"]}, \
                (item.id, case)
            n += 1
    assert n == 4 * 198
