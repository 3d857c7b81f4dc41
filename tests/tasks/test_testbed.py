"""The testbed tasks: shipped files are the generator's output, every item is
answerable from its own prompt (checked by a parser written here, independently of
the generator), the lookups really sit several windows back, prompt lengths are what
the CPU demo budgets for, and the training stream never hands out a test item."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tasks
from runtime import presets
from runtime.tokenizer import ByteTokenizer
from tasks.data_files import DEFAULT_DATA_DIR, TESTBED_FILES, read_verified
from tasks.errors import TaskDataError
from tasks.extraction import truncate_at_stops
from tasks.request import Generation
from tasks.task import score_generation
from tasks.testbed import TESTBED_TASKS, training_example
from tasks.testbed.data import load_testbed
from tasks.testbed.generate import write_all
from tasks.testbed.probe_spec import PROBE_TASKS
from tasks.testbed.spec import SPECS
from tasks.testbed.testset import item_rng, jsonl_bytes

REPO = Path(__file__).resolve().parents[2]
WINDOW = presets.testbed_config().sliding_window  # 32: the window the lookups must escape
K_WINDOWS_BACK = 3  # a queried record ends >= 3 windows (96 tokens) before the prompt's end
TOKENIZER = ByteTokenizer(vocab_size=512)
SIZES = {"testbed_lookup": 1000, "testbed_arith": 1000, "testbed_lookup_arith": 1000}
RECORD = re.compile(r"([A-Z][0-9][A-Z])=([0-9]+)")


def n_tokens(text: str) -> int:
    return len(TOKENIZER.encode(text))


def prompts(name: str) -> list[tuple[object, str]]:
    task = tasks.get(name)
    return [(item, task.render(item).prompt) for item in task.items()]


# ---- an independent reading of a prompt ------------------------------------------

def parse(prompt: str) -> tuple[dict[str, int], list[str], str]:
    """The last question block of a prompt: its records (in order, keys distinct),
    the record lines, and the query line."""
    block = prompt.rsplit("\n\nQuestion: ", 1)[1]
    assert block.endswith("\nAnswer:"), block[-40:]
    lines = block[: -len("\nAnswer:")].split("\n")
    assert lines[0] == "Records:"
    records: dict[str, int] = {}
    for line in lines[1:-1]:
        match = RECORD.fullmatch(line)
        assert match, line
        assert match.group(1) not in records, f"key {match.group(1)} defined twice"
        records[match.group(1)] = int(match.group(2))
    return records, lines[1:-1], lines[-1]


def solve(name: str, prompt: str) -> str:
    """The worked answer, recomputed from the prompt alone."""
    records, _, query = parse(prompt)
    if name == "testbed_lookup":
        key = re.fullmatch(r"What is ([A-Z][0-9][A-Z])\?", query).group(1)
        return f"{key}={records[key]}. #### {records[key]}"
    if name == "testbed_arith":
        expression = re.fullmatch(r"Compute ([0-9+-]+)\.", query).group(1)
        terms = re.findall(r"[+-]?[0-9]+", expression)
        value, steps = int(terms[0]), []
        assert 1 <= value <= 99 and 2 <= len(terms) - 1 <= 3
        for term in terms[1:]:
            assert 1 <= abs(int(term)) <= 99, expression
            new = value + int(term)
            assert 0 <= new <= 199, expression
            steps.append(f"{value}{term[0]}{term[1:]}={new}.")
            value = new
        return " ".join(steps) + f" #### {value}"
    match = re.fullmatch(r"Compute ([A-Z][0-9][A-Z])([+-])([A-Z][0-9][A-Z])\.", query)
    a, op, b = records[match.group(1)], match.group(2), records[match.group(3)]
    result = a + b if op == "+" else a - b
    assert result >= 0 and match.group(1) != match.group(3)
    return f"{match.group(1)}={a}. {match.group(3)}={b}. {a}{op}{b}={result}. #### {result}"


def queried_keys(name: str, prompt: str) -> list[str]:
    return re.findall(r"[A-Z][0-9][A-Z]", parse(prompt)[2]) if name != "testbed_arith" else []


def tokens_after_record(prompt: str, key: str) -> int:
    """Tokens between the last digit of ``key``'s record and the end of the prompt."""
    block_start = prompt.rindex("\n\nQuestion: ")
    match = re.compile(rf"\n{key}=[0-9]+").search(prompt, block_start)
    return n_tokens(prompt[match.end():])


def path_name(name: str) -> str:
    return Path(TESTBED_FILES[name].relpath).name


# ---- the tests --------------------------------------------------------------------

def test_shipped_files_are_the_generators_output(tmp_path):
    hashes = write_all(tmp_path)
    for name in TESTBED_TASKS:
        shipped = (DEFAULT_DATA_DIR / TESTBED_FILES[name].relpath).read_bytes()
        assert jsonl_bytes(name) == shipped, f"{name}: regenerate and update the hashes"
        written = (tmp_path / path_name(name)).read_bytes()
        assert written == shipped
        digest = hashlib.sha256(shipped).hexdigest()
        assert digest == TESTBED_FILES[name].sha256 == hashes[path_name(name)]
        assert read_verified(TESTBED_FILES[name]) == shipped


def test_names_sizes_ids_and_request_shape():
    assert TESTBED_TASKS == ("testbed_lookup", "testbed_arith", "testbed_lookup_arith")
    # the training tasks, then the evaluation-only boundary probes (tests/tasks/test_probes.py)
    assert tasks.names()[-3 - len(PROBE_TASKS):] == [*TESTBED_TASKS, *PROBE_TASKS]
    for name in TESTBED_TASKS:
        task = tasks.get(name)
        assert len(task.items()) == SIZES[name]
        assert [i.id for i in task.items()] == [f"{name}-{k:04d}" for k in range(SIZES[name])]
        assert task.item(f"{name}-0042").index == 42
        request = task.render(task.items()[0])
        assert request.gen.until == ("\n", "</s>", "<|im_end|>")
        assert request.gen.max_gen_toks == task.max_gen_toks == 64
        assert task.filter_names == ("strict-match", "flexible-extract")
        assert task.primary == "strict-match" and task.text_is_shareable
        assert tasks.get(name, max_gen_toks=16).max_gen_toks == 16


def test_gold_scores_one_and_wrong_zero_under_both_filters():
    for name in TESTBED_TASKS:
        task = tasks.get(name)
        for item in task.items():
            final = int(item.final_answer)
            steps = item.target.rsplit("####", 1)[0]
            for gold in (f" {item.target}\n", item.target, f" {item.target}\nQuestion: 1"):
                assert set(task.score(item, Generation(gold)).values.values()) == {1.0}, item.id
            for wrong in (f" {steps}#### {final + 1}\n", f" {steps}#### {final - 1}",
                          f"#### {final}0"):
                assert set(task.score(item, Generation(wrong)).values.values()) == {0.0}, item.id


def test_every_answer_is_recoverable_from_its_prompt():
    for name in TESTBED_TASKS:
        for item, prompt in prompts(name):
            assert solve(name, prompt) == item.target, item.id
            prefix = prompt[: prompt.rindex("\n\nQuestion: ") + 2]
            prefix_keys = {key for key, _ in RECORD.findall(prefix)}
            assert prefix_keys and not set(parse(prompt)[0]) & prefix_keys, item.id


def test_prefix_is_shared_and_its_two_exemplars_are_correct():
    for name in TESTBED_TASKS:
        pairs = prompts(name)
        first = pairs[0][1]
        prefix = first[: first.rindex("\n\nQuestion: ") + 2]
        assert all(p.startswith(prefix) for _, p in pairs)
        exemplars = prefix.split("\n\n")[:-1]
        assert len(exemplars) == 2
        for exemplar in exemplars:
            question, answer = exemplar.split("\nAnswer: ")
            assert solve(name, f"x\n\n{question}\nAnswer:") == answer


def test_lookups_sit_at_least_k_windows_back_and_arith_inside_the_window():
    for name in TESTBED_TASKS:
        closest = []
        for item, prompt in prompts(name):
            assert prompt.isascii() and n_tokens(prompt) == len(prompt)  # 1 byte = 1 token
            if name == "testbed_arith":
                assert n_tokens(prompt[prompt.rindex("\nCompute ") + 1:]) <= WINDOW, item.id
                continue
            keys = queried_keys(name, prompt)
            assert len(keys) == (1 if name == "testbed_lookup" else 2)
            distances = [tokens_after_record(prompt, key) for key in keys]
            assert min(distances) >= K_WINDOWS_BACK * WINDOW, item.id
            closest.append(min(distances))
        if closest:  # spread past the minimum, not piled up at it
            closest.sort()
            assert closest[int(0.9 * (len(closest) - 1))] >= 4 * WINDOW


@pytest.mark.parametrize("name", TESTBED_TASKS)
def test_prompt_and_answer_lengths(name):
    lengths = sorted(n_tokens(p) for _, p in prompts(name))
    quantile = lambda q: lengths[round(q * (len(lengths) - 1))]  # noqa: E731
    assert lengths[0] >= 200 and lengths[-1] <= 1000
    assert 250 <= statistics.mean(lengths) <= 400
    assert quantile(0.5) <= 380 and quantile(0.9) <= 500
    assert quantile(0.99) >= 800  # a tail of long prompts (tens of windows)
    assert sum(n > 500 for n in lengths) >= 0.05 * len(lengths)
    task = tasks.get(name)
    longest_answer = max(n_tokens(f" {item.target}\n") for item in task.items())
    assert longest_answer <= 45 and longest_answer < task.max_gen_toks


def test_training_examples_have_the_test_format_and_are_correct():
    rng = random.Random(2026)
    for name in TESTBED_TASKS:
        task = tasks.get(name)
        prefix = task.render(task.items()[0]).prompt
        prefix = prefix[: prefix.rindex("\n\nQuestion: ") + 2]
        for _ in range(2000):
            ex = training_example(name, rng)
            assert ex.prompt.startswith(prefix) and ex.prompt.endswith("\nAnswer:")
            assert ex.target.startswith(" ") and ex.target.endswith("\n")
            assert ex.target.count("\n") == 1 and ex.prompt.isascii() and ex.target.isascii()
            assert solve(name, ex.prompt) == ex.target[1:-1]
            assert truncate_at_stops(ex.target, task.gen.until) == ex.target[:-1]
            score = score_generation(task.variant.scoring, task.gen, ex.target[1:-1], (),
                                     Generation(ex.target), name)
            assert score.value == 1.0


def test_training_examples_never_coincide_with_test_items():
    for name in TESTBED_TASKS:
        test_prompts = {p for _, p in prompts(name)}
        test_exprs = {parse(p)[2] for p in test_prompts}
        rng = random.Random(99)
        for _ in range(30000):
            ex = training_example(name, rng)
            assert ex.prompt not in test_prompts
            if name == "testbed_arith":  # an arith item is its expression (filler is noise)
                assert parse(ex.prompt)[2] not in test_exprs
        # An rng that would reproduce a test item exactly is steered away from it.
        for index in (0, 1, 500):
            task = tasks.get(name)
            ex = training_example(name, item_rng(SPECS[name], index))
            assert ex.prompt != task.render(task.items()[index]).prompt


def test_training_example_is_fast():
    rng = random.Random(3)
    for name in TESTBED_TASKS:
        training_example(name, rng)
    n = 3000
    start = time.perf_counter()
    for k in range(n):
        training_example(TESTBED_TASKS[k % 3], rng)
    per_example = (time.perf_counter() - start) / n
    assert per_example < 200e-6, f"{per_example * 1e6:.0f} us per example"  # ~15 us measured


_FINGERPRINT = """
import hashlib, random
from tasks.testbed import TESTBED_TASKS, training_example
from tasks.testbed.testset import jsonl_bytes
h = hashlib.sha256()
for name in TESTBED_TASKS:
    h.update(jsonl_bytes(name))
    rng = random.Random(7)
    for _ in range(200):
        ex = training_example(name, rng)
        h.update((ex.prompt + "|" + ex.target).encode())
print(h.hexdigest())
"""


def test_deterministic_across_processes_and_hash_seeds():
    digests = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", _FINGERPRINT], cwd=REPO, env=env,
                             capture_output=True, text=True, check=True)
        digests.add(out.stdout.strip())
    assert len(digests) == 1


def test_altered_file_is_one_line_error_naming_file_and_hashes(tmp_path):
    data_dir = tmp_path / "data"
    shutil.copytree(DEFAULT_DATA_DIR / "testbed", data_dir / "testbed")
    path = data_dir / TESTBED_FILES["testbed_lookup"].relpath
    path.write_bytes(path.read_bytes().replace(b"#### ", b"#### 1", 1))
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(TaskDataError) as info:
        load_testbed("testbed_lookup", data_dir)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    assert TESTBED_FILES["testbed_lookup"].sha256 in message and actual in message
    (data_dir / TESTBED_FILES["testbed_arith"].relpath).unlink()
    with pytest.raises(TaskDataError, match="missing"):
        tasks.get("testbed_arith", data_dir=data_dir)


def test_cli_show_and_list(capsys):
    from v41val.cli import main

    def run(*args: str) -> dict:
        capsys.readouterr()
        try:
            main(list(args))
        except SystemExit as exc:
            assert not exc.code, capsys.readouterr().err
        return json.loads(capsys.readouterr().out)

    task = tasks.get("testbed_lookup_arith")
    item = task.item("testbed_lookup_arith-0007")
    doc = run("tasks", "show", task.name, "--item", item.id, "--json")
    assert doc["prompt"] == task.render(item).prompt and doc["target"] == item.target
    assert doc["gen"]["until"] == ["\n", "</s>", "<|im_end|>"]
    rows = {r["name"]: r for r in run("tasks", "list", "--json")["tasks"]}
    assert all(rows[n]["n_items"] == SIZES[n] and rows[n]["max_gen_toks"] == 64
               for n in TESTBED_TASKS)
