"""Full sizes of the tasks, for planning when the caller gives no ``n``.

The tasks package will own these numbers; until a task can be asked for its size,
``task_size`` takes an explicit ``n`` first, then this fallback table keyed by task-name
prefix (longest prefix wins, so ``gsm8k_cot`` and ``gsm8k_local`` are 1,319 and
``gpqa_diamond_cot_zeroshot`` is 198). Sizes are the test sets in evaluation.md
section 1.
"""

from __future__ import annotations

from validate.errors import StatsInputError

FALLBACK_TASK_SIZES: tuple[tuple[str, int], ...] = (
    ("gsm8k", 1319),
    ("gpqa_diamond", 198),
    ("gpqa_main", 448),
    ("gpqa_extended", 546),
)


def task_size(task: str | None, n: int | None = None) -> int:
    """``n`` if given, else the fallback size for ``task``'s longest matching prefix."""
    if n is not None:
        if n < 1:
            raise StatsInputError(f"--n must be a positive item count, got {n}")
        return int(n)
    if task:
        matches = [(len(p), size) for p, size in FALLBACK_TASK_SIZES if task.startswith(p)]
        if matches:
            return max(matches)[1]
    known = ", ".join(p for p, _ in FALLBACK_TASK_SIZES)
    raise StatsInputError(
        f"unknown size for task {task!r}: pass --n (known prefixes: {known})"
    )
