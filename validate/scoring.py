"""Score stored responses with the tasks' own scorers, after they are stored.

Score keys are lm-eval's results keys (``exact_match,flexible-extract``, ``acc,none``),
so a run of the store, an imported lm-eval run and a gate policy name a metric the same
way. Below both the runner (which scores after storing) and the analysis (which reads
scores by these keys).
"""

from __future__ import annotations

from collections.abc import Mapping

from tasks.extraction import INVALID
from tasks.score import Score
from tasks.task import Task, TaskInfo
from validate.store import ResultsStore, ScoreRecord

MC_METRICS = ("acc", "acc_norm")


def metric_key(task: Task | TaskInfo, name: str) -> str:
    """The results key of one score entry: a filter of a generated answer, or a
    multiple-choice metric (lm-eval's filter is then "none")."""
    return f"{name},none" if task.kind == "loglikelihood" else f"exact_match,{name}"


def primary_metric(task: Task | TaskInfo) -> str:
    return metric_key(task, task.primary)


def score_records(task: Task, score: Score) -> list[ScoreRecord]:
    records = []
    for name, value in score.values.items():
        extracted = score.extracted.get(name)
        invalid = score.invalid if task.kind == "loglikelihood" else extracted == INVALID
        records.append(ScoreRecord(filter=metric_key(task, name), score=float(value),
                                   extracted=extracted, invalid=bool(invalid)))
    return records


def scorer_name(task: Task) -> str:
    return f"{task.name}@{task.version}"


def score_pending(store: ResultsStore, plan_hash: str, loaded: Mapping[str, Task]) -> int:
    """Score every stored response of the plan that has no score yet; returns how many."""
    n = 0
    for stored in store.unscored(plan_hash):
        task = loaded.get(stored.key.task)
        if task is None:
            continue  # a task of another plan version: leave it for its own scorer
        score = task.score(task.item(stored.key.item_id), stored.record.response)
        store.put_scores(plan_hash, stored.key, score_records(task, score), scorer_name(task))
        n += 1
    return n
