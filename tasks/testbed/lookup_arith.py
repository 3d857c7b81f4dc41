"""``testbed_lookup_arith``: fetch two values from far back, then add or subtract.

Question tail and answer::

    ...
    Z9A=3
    Compute K7Q-B2C.
    Answer: K7Q=42. B2C=17. 42-17=25. #### 25

Both records end at least ``min_windows_back`` windows before the prompt's end, so
both retrievals need the compressed/indexed path; the sum itself is local (the two
values were just written). For ``-`` the larger value comes first: no negatives.
"""

from __future__ import annotations

import random

from tasks.testbed.params import WINDOW, LookupArithParams
from tasks.testbed.problem import Problem
from tasks.testbed.records import RECORDS_HEADER, RecordDrawer, far_indices, record_lines

_TAIL = len("Compute K7Q+B2C.\nAnswer:")


def generate(params: LookupArithParams, drawer: RecordDrawer, rng: random.Random) -> Problem:
    keys, values = drawer.draw(rng, params.records.draw(rng))
    lines = record_lines(keys, values)
    eligible = far_indices(lines, _TAIL, params.min_windows_back * WINDOW)
    i, j = rng.sample(range(eligible), 2)
    op = "+" if rng.random() < 0.5 else "-"
    a, b = int(values[i]), int(values[j])
    if op == "-" and a < b:
        i, j, a, b = j, i, b, a
    result = a + b if op == "+" else a - b
    ka, kb = keys[i], keys[j]
    question = f"{RECORDS_HEADER}{''.join(lines)}Compute {ka}{op}{kb}."
    return Problem(question, f"{ka}={a}. {kb}={b}. {a}{op}{b}={result}. #### {result}")
