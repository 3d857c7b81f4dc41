"""``testbed_arith``: a short chain of ``+``/``-`` whose every input sits in the
last window, after irrelevant filler records.

Question tail and answer::

    ...
    Z9A=3
    Compute 12+7-4.
    Answer: 12+7=19. 19-4=15. #### 15

The filler only makes the prompt long (so replay, prefix caching and the compressed
path are exercised); the answer depends on the question line alone, which with at
most three operations on 1-2 digit operands fits inside one 32-token window.
"""

from __future__ import annotations

import random

from tasks.testbed.params import ArithParams
from tasks.testbed.problem import Problem
from tasks.testbed.records import RECORDS_HEADER, RecordDrawer, record_lines


def _chain(params: ArithParams, rng: random.Random) -> tuple[str, list[str], int]:
    """The expression, one ``a+b=c.`` step per operation, and the result; every
    intermediate value stays in ``[0, result_max]``."""
    value = rng.randint(1, params.operand_max)
    expression = str(value)
    steps = []
    for _ in range(rng.randint(params.min_ops, params.max_ops)):
        can_add = value < params.result_max
        if value > 0 and (not can_add or rng.random() < 0.5):
            operand = rng.randint(1, min(params.operand_max, value))
            new, op = value - operand, "-"
        else:
            operand = rng.randint(1, min(params.operand_max, params.result_max - value))
            new, op = value + operand, "+"
        expression += f"{op}{operand}"
        steps.append(f"{value}{op}{operand}={new}.")
        value = new
    return expression, steps, value


def generate(params: ArithParams, drawer: RecordDrawer, rng: random.Random) -> Problem:
    keys, values = drawer.draw(rng, params.filler.draw(rng))
    expression, steps, result = _chain(params, rng)
    question = f"{RECORDS_HEADER}{''.join(record_lines(keys, values))}Compute {expression}."
    return Problem(question, f"{' '.join(steps)} #### {result}")


def expression_of(problem: Problem) -> str:
    """The arithmetic itself: what makes two arith items the same question (the filler
    never changes the answer)."""
    return problem.question.rsplit("Compute ", 1)[1]
