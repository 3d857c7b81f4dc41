"""Reading real lm-eval 0.4.13 ``--log_samples`` output, produced here with two tiny
deterministic models, and ``compare`` reproducing lm-eval's own accuracies."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from v41val.cli import main
from validate.errors import PairingError, SamplesFileError
from validate.gate.from_lmeval import compare_lmeval
from validate.lmeval_samples import read_run

pytestmark = pytest.mark.slow  # ~10 s: builds the GSM8K datasets and runs lm-eval twice

TASK = "gsm8k_v41val_test"
LIMIT = 20

TASK_YAML = """\
task: {task}
dataset_path: json
dataset_kwargs:
  data_files:
    train: {data}/train.jsonl
    test: {data}/test.jsonl
  cache_dir: {cache}
output_type: generate_until
training_split: train
fewshot_split: train
test_split: test
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: false
    regexes_to_ignore: [",", "\\\\$", "(?s).*#### ", "\\\\.$"]
generation_kwargs:
  until: ["Question:", "</s>", "<|im_end|>"]
  do_sample: false
  temperature: 0.0
repeats: 1
num_fewshot: 5
filter_list:
  - name: "strict-match"
    filter:
      - function: "regex"
        regex_pattern: "#### (\\\\-?[0-9\\\\.\\\\,]+)"
      - function: "take_first"
  - name: "flexible-extract"
    filter:
      - function: "regex"
        group_select: -1
        regex_pattern: "(-?[$0-9.,]{{2,}})|(-?[0-9]+)"
      - function: "take_first"
metadata:
  version: 3.0
"""


def gold_answer(doc: dict) -> str:
    return doc["answer"].split("#### ")[-1].strip()


def make_models():
    from lm_eval.api.model import LM

    class _Scripted(LM):
        """Answers from the gold solution by a fixed per-doc script (no randomness)."""

        def answer(self, doc_id: int, gold: str) -> str:
            raise NotImplementedError

        def generate_until(self, requests):
            return [self.answer(r.doc_id, gold_answer(r.doc)) for r in requests]

        def loglikelihood(self, requests):
            raise NotImplementedError

        def loglikelihood_rolling(self, requests):
            raise NotImplementedError

    class Baseline(_Scripted):
        def answer(self, doc_id, gold):
            if doc_id % 4 == 0:
                return f" Working. #### {int(gold.replace(',', '')) + 1}"
            return f" Working. #### {gold}"

    class Candidate(_Scripted):
        def answer(self, doc_id, gold):
            if doc_id % 5 == 0:
                return f" So it is {int(gold.replace(',', '')) + 2}."
            if doc_id % 3 == 0:
                return f" The answer is {gold}."  # flexible right, strict [invalid]
            return f" Working. #### {gold}"

    return Baseline(), Candidate()


@pytest.fixture(scope="module")
def lmeval_runs(tmp_path_factory, repo_root):
    base = tmp_path_factory.mktemp("lmeval")
    data = repo_root / "tasks" / "data" / "gsm8k"
    tasks_dir = base / "tasks"
    tasks_dir.mkdir()
    (tasks_dir / f"{TASK}.yaml").write_text(
        TASK_YAML.format(task=TASK, data=data, cache=base / "hf_datasets")
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("HF_HOME", str(base / "hf_home"))
        import lm_eval
        from lm_eval.loggers import EvaluationTracker
        from lm_eval.tasks import TaskManager

        manager = TaskManager(include_path=str(tasks_dir), include_defaults=False)
        out = {}
        for name, model in zip(("A", "B"), make_models(), strict=True):
            results = lm_eval.simple_evaluate(
                model=model, tasks=[TASK], task_manager=manager, limit=LIMIT,
                log_samples=True, bootstrap_iters=0,
            )
            samples = results.pop("samples")
            tracker = EvaluationTracker(output_path=str(base / name))
            tracker.save_results_aggregated(results=results, samples=samples)
            tracker.save_results_samples(task_name=TASK, samples=samples[TASK])
            out[name] = base / name
    return out


def lmeval_reported(run_dir: Path) -> dict:
    (results_file,) = run_dir.rglob("results_*.json")
    return json.loads(results_file.read_text())["results"][TASK]


def test_compare_reproduces_lmeval_accuracies(lmeval_runs):
    result = compare_lmeval(lmeval_runs["A"], lmeval_runs["B"])
    comparison = result.comparison
    assert sorted(comparison.metrics_of(TASK)) == [
        "exact_match,flexible-extract", "exact_match,strict-match"
    ]
    reported_a = lmeval_reported(lmeval_runs["A"])
    reported_b = lmeval_reported(lmeval_runs["B"])
    for metric in comparison.metrics_of(TASK):
        row = comparison.row(TASK, metric)
        assert row.accuracy_a.n_items == LIMIT and row.coverage == 1.0
        assert row.accuracy_a.mean == pytest.approx(reported_a[metric], abs=1e-12)
        assert row.accuracy_b.mean == pytest.approx(reported_b[metric], abs=1e-12)
        assert row.paired.delta == pytest.approx(reported_b[metric] - reported_a[metric])
    # the scripts, by hand: A wrong on doc % 4 == 0; B wrong on % 5 == 0 and, strictly,
    # also on % 3 == 0
    docs = range(LIMIT)
    strict_b = sum(1 for d in docs if d % 5 and d % 3) / LIMIT
    assert comparison.row(TASK, "exact_match,strict-match").accuracy_b.mean == pytest.approx(strict_b)
    flex = comparison.row(TASK, "exact_match,flexible-extract").paired
    b_only_wrong = sum(1 for d in docs if d % 4 and d % 5 == 0)
    a_only_wrong = sum(1 for d in docs if d % 4 == 0 and d % 5)
    assert (flex.table.a_only, flex.table.b_only) == (b_only_wrong, a_only_wrong)


def test_reader_health_facts(lmeval_runs):
    run_b = read_run(lmeval_runs["B"])
    strict = run_b.health[(TASK, "strict-match")]
    assert strict.n_docs == LIMIT
    invalid = sum(1 for d in range(LIMIT) if d % 5 == 0 or d % 3 == 0) / LIMIT
    assert strict.invalid_rate == pytest.approx(invalid)
    assert strict.empty_rate == 0.0 and strict.mean_length > 5


def test_health_from_runs_counts_the_flagged_docs_for_the_paired_test(lmeval_runs):
    """A never answers [invalid] under strict-match, B does on doc % 5 == 0 or % 3 == 0:
    all of B's are discordant, and the health check's test sees them."""
    from validate.gate.health import HealthThresholds, health_failures, rise_p
    from validate.lmeval_samples import health_from_runs, select_table
    from validate.stats.outcomes import pair_outcomes

    run_a, run_b = read_run(lmeval_runs["A"]), read_run(lmeval_runs["B"])
    metric = "exact_match,strict-match"
    paired = pair_outcomes(select_table(run_a, TASK, metric), select_table(run_b, TASK, metric))
    report = health_from_runs(run_a, run_b, paired)
    flagged = sum(1 for d in range(LIMIT) if d % 5 == 0 or d % 3 == 0)
    assert report.invalid_discordant == (0, flagged) and report.empty_discordant == (0, 0)
    assert rise_p(report.invalid_discordant) == pytest.approx(0.5 ** flagged)
    reasons = health_failures(report, HealthThresholds())
    assert (0.5 ** flagged <= 0.001) == any("invalid-answer" in r for r in reasons)


def test_compare_cli_json_and_prompt_mismatch(lmeval_runs, tmp_path, capsys):
    main(["compare", str(lmeval_runs["A"]), str(lmeval_runs["B"]), "--json",
          "--bootstrap", "1000"])
    doc = json.loads(capsys.readouterr().out)
    reported_b = lmeval_reported(lmeval_runs["B"])
    got = {row["metric"]: row["b"]["mean"] for row in doc["comparisons"]}
    assert got == pytest.approx({k: reported_b[k] for k in got})
    assert all(row["paired"]["alpha"] == 0.05 and "test" in row["paired"] for row in doc["comparisons"])

    (samples_b,) = Path(lmeval_runs["B"]).rglob("samples_*.jsonl")
    broken = tmp_path / "B2" / samples_b.name
    broken.parent.mkdir()
    lines = samples_b.read_text().splitlines()
    first = json.loads(lines[0])
    first["prompt_hash"] = "0" * 64
    lines[0] = json.dumps(first)
    broken.write_text("\n".join(lines) + "\n")
    with pytest.raises(PairingError, match=rf"item {first['doc_id']} has different prompts"):
        compare_lmeval(lmeval_runs["A"], broken.parent)
    with pytest.raises(SystemExit) as info:
        main(["compare", str(lmeval_runs["A"]), str(broken)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1
    assert re.search(rf"item {first['doc_id']} has different prompts", err)


def test_reader_errors_are_one_line(lmeval_runs, tmp_path):
    (samples_a,) = Path(lmeval_runs["A"]).rglob("samples_*.jsonl")
    twice = tmp_path / "twice"
    (twice / "x").mkdir(parents=True)
    shutil.copy(samples_a, twice / samples_a.name)
    shutil.copy(samples_a, twice / "x" / f"samples_{TASK}_2020-01-01T00-00-00.000001.jsonl")
    with pytest.raises(SamplesFileError, match="2 sample files for task"):
        read_run(twice)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"doc_id": 0, "metrics": ["exact_match"], "exact_match": 1.0}\n{oops\n')
    with pytest.raises(SamplesFileError, match=r"bad.jsonl:2: not valid JSON"):
        read_run(bad)
    with pytest.raises(SamplesFileError, match="no such file"):
        read_run(tmp_path / "missing")
