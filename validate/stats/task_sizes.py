"""Full sizes of the tasks, for planning when the caller gives no ``n``.

Order of sources: an explicit ``n``; then the tasks package (``tasks.info(name)``: the
item count its loader requires of the shipped file, read without loading it); then,
for names the tasks package does not know (an lm-eval task name such as
``gsm8k_local`` read from sample files), a fallback table keyed by task-name prefix
(longest prefix wins: ``gsm8k_cot`` is 1,319, ``gpqa_diamond_cot_zeroshot`` 198).
The fallback sizes are the test sets in docs/evaluation.md §1.
"""

from __future__ import annotations

from validate.errors import StatsInputError

FALLBACK_TASK_SIZES: tuple[tuple[str, int], ...] = (
    ("gsm8k", 1319),
    ("gpqa_diamond", 198),
    ("gpqa_main", 448),
    ("gpqa_extended", 546),
)


def _registered_size(task: str) -> int | None:
    import tasks

    if task not in tasks.names():
        return None
    return tasks.info(task).n_items


def task_size(task: str | None, n: int | None = None) -> int:
    """``n`` if given, else the task's item count (tasks package, then fallback table)."""
    if n is not None:
        if n < 1:
            raise StatsInputError(f"--n must be a positive item count, got {n}")
        return int(n)
    if task:
        registered = _registered_size(task)
        if registered is not None:
            return registered
        matches = [(len(p), size) for p, size in FALLBACK_TASK_SIZES if task.startswith(p)]
        if matches:
            return max(matches)[1]
    known = ", ".join(p for p, _ in FALLBACK_TASK_SIZES)
    raise StatsInputError(
        f"unknown size for task {task!r}: pass --n (known prefixes: {known})"
    )
