"""GPQA: fixed, recorded choice order; same prompts in every process; prompts laid
out exactly as lm-eval's templates lay out the same choices.

Nothing here prints GPQA text: comparisons are of hashes, ids and indices.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import subprocess
import sys
import zipfile
from collections import Counter
from functools import lru_cache

import pytest

import tasks
from tasks.data_files import DEFAULT_DATA_DIR
from tasks.gpqa import GPQA_STYLES, GPQA_SUBSETS
from tasks.request import sha256_text

SIZES = {"diamond": 198, "main": 448, "extended": 546}

_FINGERPRINT_SCRIPT = """
import json, random, sys
random.seed(int(sys.argv[1]))          # a different global RNG state per process
random.random()
import tasks
out = {}
for name in tasks.names():
    if not name.startswith("gpqa_"):
        continue
    task = tasks.get(name)
    out[name] = {it.id: [list(it.permutation), it.answer_index, task.render(it).prompt_sha256]
                 for it in task.items()}
json.dump(out, sys.stdout)
"""


def _fingerprints_in_subprocesses(seeds: list[tuple[str, str]]) -> list[dict]:
    """Run the fingerprint script in fresh interpreters, concurrently; one
    (PYTHONHASHSEED, global random seed) pair per process."""
    procs = [subprocess.Popen([sys.executable, "-c", _FINGERPRINT_SCRIPT, rng_seed],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONHASHSEED": hash_seed})
             for hash_seed, rng_seed in seeds]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        results.append(json.loads(out))
    return results


@pytest.mark.slow
def test_same_prompts_and_permutations_in_fresh_processes():
    first, second = _fingerprints_in_subprocesses([("1", "7"), ("4242", "99")])
    names = [f"gpqa_{s}_{style}" for s in GPQA_SUBSETS for style in GPQA_STYLES]
    assert sorted(first) == sorted(names)
    for name in names:
        subset = name.split("_")[1]
        assert len(first[name]) == SIZES[subset]
        assert first[name] == second[name], name
    here = tasks.get("gpqa_main_cot_zeroshot")
    for item in here.items():
        assert first["gpqa_main_cot_zeroshot"][item.id] == [
            list(item.permutation), item.answer_index, here.render(item).prompt_sha256]


@lru_cache(maxsize=3)
def _raw_rows(subset: str) -> list[dict]:
    """The CSV rows, read in memory independently of the tasks package."""
    archive = zipfile.ZipFile(DEFAULT_DATA_DIR / "gpqa" / "dataset.zip")
    raw = archive.read(f"dataset/gpqa_{subset}.csv", pwd=b"deserted-untie-orchid")
    return list(csv.DictReader(io.StringIO(raw.decode("utf-8"), newline="")))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _clean(text: str) -> str:
    # lm-eval's answer cleaning, restated: strip; " [title]" -> ". "; "  " -> " ".
    return text.strip().replace(" [title]", ". ").replace("  ", " ")


def _expected_order(record_id: str) -> list[int]:
    keys = {slot: hashlib.sha256(f"v41val-gpqa-choice-order-v1|{record_id}|{slot}".encode())
            .hexdigest() for slot in range(4)}
    return sorted(keys, key=keys.get)


@pytest.mark.parametrize("subset", GPQA_SUBSETS)
def test_items_follow_the_recorded_permutation(subset):
    task = tasks.get(f"gpqa_{subset}_cot_zeroshot")
    rows = _raw_rows(subset)
    items = task.items()
    assert len(items) == len(rows) == SIZES[subset]
    letters = Counter()
    for row, item in zip(rows, items, strict=True):
        assert item.id == row["Record ID"]
        source = [_clean(row[f"Incorrect Answer {k}"]) for k in (1, 2, 3)]
        source.append(_clean(row["Correct Answer"]))
        assert list(item.permutation) == _expected_order(row["Record ID"]), item.id
        shown = [_digest(c) for c in item.choices]  # digests: never GPQA text in a message
        assert shown == [_digest(source[s]) for s in item.permutation], item.id
        assert shown[item.answer_index] == _digest(source[3]), item.id
        assert item.target == f"({'ABCD'[item.answer_index]})"
        assert _digest(item.question) == _digest(row["Question"]), item.id
        letters[item.target] += 1
    # A fixed order must still be a shuffle: every letter holds the answer sometimes.
    assert all(0.15 * len(items) < letters[f"({x})"] < 0.35 * len(items) for x in "ABCD"), \
        dict(letters)


def test_item_repr_hides_gpqa_text():
    task = tasks.get("gpqa_diamond_zeroshot")
    item = task.items()[0]
    shown = repr(item) + str(item)
    leaked = item.question in shown or any(choice in shown for choice in item.choices)
    assert not leaked, f"repr of {item.id} shows GPQA text"
    assert item.id in shown


@pytest.mark.parametrize("subset", GPQA_SUBSETS)
def test_prompts_equal_lm_eval_templates_for_the_same_choice_order(subset, lm_eval_ref,
                                                                  monkeypatch):
    """lm-eval's own YAML templates, rendered with lm-eval's jinja environment on a doc
    holding our choice order, give byte-identical prompts (compared by sha256)."""
    from lm_eval.utils import apply_template

    lm_eval_ref.cache_jinja_compilation(monkeypatch)
    for style in ("zeroshot", "cot_zeroshot", "generative_n_shot"):
        config = lm_eval_ref.read_lm_eval_yaml(f"gpqa/{lm_eval_ref.GPQA_YAMLS[style]}")
        task = tasks.get(f"gpqa_{subset}_{style}")
        for item in task.items():
            doc = {"Question": item.question, **{f"choice{k + 1}": c
                                                 for k, c in enumerate(item.choices)}}
            expected = config.get("description", "") + apply_template(config["doc_to_text"], doc)
            request = task.render(item)
            assert request.prompt_sha256 == sha256_text(expected), (style, item.id)
            if style == "zeroshot":
                assert request.continuations == tuple(f" {c}" for c in config["doc_to_choice"])
                assert config["doc_to_target"] == "answer"
            else:
                until = tuple(config["generation_kwargs"]["until"])
                assert request.gen.until == until
                assert request.gen.temperature == config["generation_kwargs"]["temperature"]
