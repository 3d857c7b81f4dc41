"""The training stream for ``training/``: endless fresh examples in the test format.

    from tasks.testbed import TESTBED_TASKS, training_example
    ex = training_example("testbed_lookup", random.Random(seed))
    ex.prompt   # exactly what the task renders for an item, few-shot prefix included
    ex.target   # " " + worked answer + "\\n"   (the trainer appends EOS after it)

``target`` is the continuation a perfect model emits after ``prompt``: lm-eval's
target delimiter (one space), the worked answer ending in ``#### N``, then ``\\n``,
the task's first stop string, so generation ends there (or at the EOS after it).

Examples never coincide with a test item: a draw whose identity (the whole question;
for ``testbed_arith`` the expression alone, since the filler never changes the
answer) belongs to the test set is redrawn.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tasks.testbed.exemplars import query
from tasks.testbed.spec import SPECS
from tasks.testbed.testset import testset_identities

ANSWER_END = "\n"


@dataclass(frozen=True)
class TrainingExample:
    prompt: str
    target: str


def training_example(task_name: str, rng: random.Random) -> TrainingExample:
    """One fresh example of ``task_name`` drawn with ``rng`` (deterministic given the
    rng's state); never a test item. The first call per task builds the test set in
    memory (~tens of ms)."""
    spec = SPECS[task_name]
    excluded = testset_identities(task_name)
    problem = spec.generate(rng)
    while spec.identity(problem) in excluded:
        problem = spec.generate(rng)
    return TrainingExample(spec.prefix + query(problem.question),
                           f" {problem.answer}{ANSWER_END}")
