"""The test sets: ``test_size`` problems per task, each drawn from its own seeded
``random.Random``, so item ``i`` depends only on (task, seed, i) and ids are stable.

Seeding by a string goes through sha512 in CPython (``Random.seed`` version 2), so
the items do not depend on ``PYTHONHASHSEED`` or on the process. A draw whose
identity repeats an earlier item's is redrawn from the same generator: test items
are distinct questions.
"""

from __future__ import annotations

import json
import random
from functools import cache

from tasks.testbed.catalog import ALL_SPECS as SPECS
from tasks.testbed.problem import Problem
from tasks.testbed.spec import TestbedSpec


def item_id(task_name: str, index: int) -> str:
    return f"{task_name}-{index:04d}"


def item_rng(spec: TestbedSpec, index: int) -> random.Random:
    return random.Random(f"v41val-testbed|{spec.name}|test|seed={spec.test_seed}|{index}")


@cache
def testset_problems(task_name: str) -> tuple[Problem, ...]:
    """The task's test problems in item order."""
    spec = SPECS[task_name]
    seen: set[str] = set()
    problems = []
    for index in range(spec.test_size):
        rng = item_rng(spec, index)
        problem = spec.generate(rng)
        while spec.identity(problem) in seen:
            problem = spec.generate(rng)
        seen.add(spec.identity(problem))
        problems.append(problem)
    return tuple(problems)


@cache
def testset_identities(task_name: str) -> frozenset[str]:
    """The identities of the task's test problems (what training must avoid)."""
    identity = SPECS[task_name].identity
    return frozenset(identity(p) for p in testset_problems(task_name))


def jsonl_bytes(task_name: str) -> bytes:
    """The shipped file's exact bytes: one ``{"id", "question", "answer"}`` object per
    line, ASCII-escaped JSON, ``\\n`` line ends."""
    lines = [json.dumps({"id": item_id(task_name, i), "question": p.question,
                         "answer": p.answer}, ensure_ascii=True) + "\n"
             for i, p in enumerate(testset_problems(task_name))]
    return "".join(lines).encode("ascii")
