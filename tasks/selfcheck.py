"""``v41val tasks check``: can these tasks be trusted on this machine, right now?

Checks, each reported separately: every shipped data file matches its sha256; every
task loads with its expected item count and unique ids; on every item of every task a
gold-answer oracle scores 1.0 and a wrong-answer oracle 0.0 under every filter/metric.
A failure is reported, never raised, so one broken file does not hide the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tasks.data_files import ALL_FILES, read_verified, resolve_data_dir
from tasks.errors import TaskDataError
from tasks.gpqa_data import GPQA_SUBSET_SIZES
from tasks.gsm8k_data import GSM8K_TEST_SIZE
from tasks.oracles import gold_response, wrong_response
from tasks.registry import get, names
from tasks.testbed.catalog import ALL_SPECS as TESTBED_SPECS


@dataclass(frozen=True)
class CheckResult:
    check: str
    subject: str
    passed: bool
    detail: str

    def to_dict(self) -> dict:
        return {"check": self.check, "subject": self.subject, "passed": self.passed,
                "detail": self.detail}


@dataclass(frozen=True)
class SelfCheckReport:
    results: tuple[CheckResult, ...]

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    def to_dict(self) -> dict:
        return {"passed": self.passed,
                "n_checks": len(self.results),
                "n_failed": sum(not r.passed for r in self.results),
                "results": [r.to_dict() for r in self.results]}


def expected_item_count(dataset: str) -> int:
    if dataset in TESTBED_SPECS:
        return TESTBED_SPECS[dataset].test_size
    return GSM8K_TEST_SIZE if dataset == "gsm8k" else GPQA_SUBSET_SIZES[dataset[len("gpqa_"):]]


def _check_files(data_dir: Path | None) -> list[CheckResult]:
    results = []
    for data_file in ALL_FILES:
        try:
            read_verified(data_file, data_dir)
            results.append(CheckResult("checksum", data_file.relpath, True,
                                       f"sha256 {data_file.sha256[:16]}…"))
        except TaskDataError as exc:
            results.append(CheckResult("checksum", data_file.relpath, False, str(exc)))
    return results


def _check_task(name: str, data_dir: Path | None) -> list[CheckResult]:
    try:
        task = get(name, data_dir=data_dir)
    except TaskDataError as exc:
        return [CheckResult("load", name, False, str(exc))]
    items = task.items()
    expected = expected_item_count(task.dataset)
    ids_unique = len({item.id for item in items}) == len(items)
    results = [CheckResult("items", name, len(items) == expected and ids_unique,
                           f"{len(items)} items (expected {expected}), ids unique: {ids_unique}")]
    gold_sum = dict.fromkeys(task.filter_names, 0.0)
    wrong_sum = dict.fromkeys(task.filter_names, 0.0)
    for item in items:
        task.render(item)
        gold = task.score(item, gold_response(task, item))
        wrong = task.score(item, wrong_response(task, item))
        for key in task.filter_names:
            gold_sum[key] += gold.values[key]
            wrong_sum[key] += wrong.values[key]
    n = len(items)
    gold_mean = {k: v / n for k, v in gold_sum.items()}
    wrong_mean = {k: v / n for k, v in wrong_sum.items()}
    ok = all(v == 1.0 for v in gold_mean.values()) and all(v == 0.0 for v in wrong_mean.values())
    detail = ", ".join(f"{k}: gold {gold_mean[k]:.4f} wrong {wrong_mean[k]:.4f}"
                       for k in task.filter_names)
    results.append(CheckResult("oracle", name, ok, detail))
    return results


def run_self_check(data_dir: Path | str | None = None,
                   task_names: list[str] | None = None) -> SelfCheckReport:
    directory = None if data_dir is None else resolve_data_dir(data_dir)
    results = _check_files(directory)
    for name in task_names or names():
        results.extend(_check_task(name, directory))
    return SelfCheckReport(tuple(results))
