"""Every GSM8K-family prompt equals lm-eval 0.4.13's own rendering, item by item.

lm-eval's installed YAMLs are pointed at the shipped json files and loaded offline;
each of its 1,319 requests per task is compared with ours by sha256, and the
generation arguments (stop strings, sampling) are compared too.
"""

from __future__ import annotations

import pytest

import tasks
from tasks.data_files import DEFAULT_DATA_DIR
from tasks.request import sha256_text

PARITY_TASKS = ["gsm8k", "gsm8k_cot", "gsm8k_cot_zeroshot"]


@pytest.fixture(scope="module")
def lm_eval_requests(tmp_path_factory, lm_eval_ref):
    """{task: [(prompt, gen_kwargs, target) per doc]} built by lm-eval itself."""
    tmp = tmp_path_factory.mktemp("lm_eval")
    with pytest.MonkeyPatch.context() as mp:
        lm_eval_ref.offline_env(mp, tmp)
        lm_eval_ref.cache_jinja_compilation(mp)
        lm_eval_ref.write_local_gsm8k_yamls(tmp / "yamls", DEFAULT_DATA_DIR)
        loaded = lm_eval_ref.load_lm_eval_tasks(tmp / "yamls", PARITY_TASKS)
        out = {}
        for name in PARITY_TASKS:
            task = loaded[name]
            task.build_all_requests(rank=0, world_size=1)
            rows = []
            for inst in sorted(task.instances, key=lambda i: i.doc_id):
                context, gen_kwargs = inst.args
                rows.append((inst.doc_id, context, gen_kwargs, str(task.doc_to_target(inst.doc))))
            out[name] = rows
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", PARITY_TASKS)
def test_every_prompt_hash_equals_lm_eval(name, lm_eval_requests):
    ours = tasks.get(name)
    theirs = lm_eval_requests[name]
    assert len(theirs) == len(ours.items()) == 1319
    mismatched = []
    for (doc_id, context, _, _), item in zip(theirs, ours.items(), strict=True):
        assert item.id == f"gsm8k-test-{doc_id:04d}"
        request = ours.render(item)
        if request.prompt_sha256 != sha256_text(context):
            mismatched.append(item.id)
    assert mismatched == [], f"{len(mismatched)} prompts differ, first: {mismatched[:5]}"


@pytest.mark.slow
@pytest.mark.parametrize("name", PARITY_TASKS)
def test_generation_arguments_and_targets_equal_lm_eval(name, lm_eval_requests):
    ours = tasks.get(name)
    for (_, _, gen_kwargs, target), item in zip(lm_eval_requests[name], ours.items(),
                                               strict=True):
        request = ours.render(item)
        assert tuple(gen_kwargs["until"]) == request.gen.until
        assert bool(gen_kwargs.get("do_sample", False)) is request.gen.do_sample
        assert float(gen_kwargs.get("temperature", 0.0)) == request.gen.temperature
        assert "max_gen_toks" not in gen_kwargs  # lm-eval leaves it to the model default
        assert request.gen.max_gen_toks > 0
        assert item.target == target
