"""The three testbed tasks: name, parameters, generator, exemplars, test-set size.

Sizes were chosen for the CPU demo (2 cores, ~1 ms per prompt token per variant):
mean prompt about 300 tokens with the few-shot prefix, a tail of long items up to
~1000 tokens (tens of 32-token windows). ``tests/tasks/test_testbed.py`` asserts the
quantiles, so a change here that moves them is caught.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tasks.testbed import arith, lookup, lookup_arith
from tasks.testbed.exemplars import (
    ARITH_EXEMPLARS,
    LOOKUP_ARITH_EXEMPLARS,
    LOOKUP_EXEMPLARS,
    RESERVED_KEYS,
    fewshot_prefix,
)
from tasks.testbed.params import ArithParams, LengthMix, LookupArithParams, LookupParams
from tasks.testbed.problem import Problem
from tasks.testbed.records import RecordDrawer


def _whole_question(problem: Problem) -> str:
    return problem.question


@dataclass(frozen=True)
class TestbedSpec:
    """Everything that defines one testbed task's items. ``identity`` says when two
    problems count as the same item (test items are unique under it; training
    examples never share it with a test item)."""

    name: str
    params: Any
    generator: Callable[[Any, RecordDrawer, random.Random], Problem]
    exemplars: tuple[tuple[str, str], ...]
    identity: Callable[[Problem], str] = _whole_question
    test_size: int = 1000
    test_seed: int = 1
    prefix: str = field(init=False)
    drawer: RecordDrawer = field(init=False, compare=False, repr=False)

    __test__ = False  # not a pytest class, despite the name

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefix", fewshot_prefix(self.exemplars))
        value_max = getattr(self.params, "value_max", 99)
        object.__setattr__(self, "drawer", RecordDrawer(RESERVED_KEYS, value_max))

    def generate(self, rng: random.Random) -> Problem:
        return self.generator(self.params, self.drawer, rng)


LOOKUP = TestbedSpec(
    name="testbed_lookup",
    params=LookupParams(records=LengthMix(short_min=14, short_max=26, long_max=110,
                                          long_fraction=0.10)),
    generator=lookup.generate,
    exemplars=LOOKUP_EXEMPLARS,
)
ARITH = TestbedSpec(
    name="testbed_arith",
    params=ArithParams(filler=LengthMix(short_min=0, short_max=24, long_max=110,
                                        long_fraction=0.10)),
    generator=arith.generate,
    exemplars=ARITH_EXEMPLARS,
    identity=arith.expression_of,
)
LOOKUP_ARITH = TestbedSpec(
    name="testbed_lookup_arith",
    params=LookupArithParams(records=LengthMix(short_min=15, short_max=21, long_max=110,
                                               long_fraction=0.10)),
    generator=lookup_arith.generate,
    exemplars=LOOKUP_ARITH_EXEMPLARS,
)

SPECS = {spec.name: spec for spec in (LOOKUP, ARITH, LOOKUP_ARITH)}
TESTBED_TASKS = tuple(SPECS)
