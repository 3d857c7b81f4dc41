"""``testbed_lookup``: find one key's value among many records, far back.

Question tail and answer::

    ...
    Z9A=3
    What is K7Q?
    Answer: K7Q=42. #### 42

The answer first repeats the key (copied from the question, inside the window), so
the only hard step is the value: it must be fetched from a record at least
``min_windows_back`` windows back, through the compressed/indexed path.
"""

from __future__ import annotations

import random

from tasks.testbed.params import WINDOW, LookupParams
from tasks.testbed.problem import Problem
from tasks.testbed.records import RECORDS_HEADER, RecordDrawer, far_indices, record_lines

_TAIL = len("What is K7Q?\nAnswer:")


def generate(params: LookupParams, drawer: RecordDrawer, rng: random.Random) -> Problem:
    keys, values = drawer.draw(rng, params.records.draw(rng))
    lines = record_lines(keys, values)
    eligible = far_indices(lines, _TAIL, params.min_windows_back * WINDOW)
    i = rng.randrange(eligible)
    key, value = keys[i], values[i]
    question = f"{RECORDS_HEADER}{''.join(lines)}What is {key}?"
    return Problem(question, f"{key}={value}. #### {value}")
