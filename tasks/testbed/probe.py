"""Boundary probes: ``testbed_lookup`` items built to land on a structural boundary.

Same question and answer as ``testbed_lookup`` (records, ``What is K7Q?``,
``K7Q=42. #### 42``), so the trained testbed answers them; what differs is that the
prompt's total length and the queried record's position are chosen, not drawn: the
record lines are 6 or 7 tokens (one- or two-digit values), and the lines before and
after the queried one are filled to exact token counts. Placement needs the prompt's
layout, so the generator knows the lookup prefix; the placement test re-reads the
rendered prompt with the real tokenizer instead of trusting these numbers.
"""

from __future__ import annotations

import random

from tasks.testbed.boundaries import PREFILL_CHUNK, WINDOW, warm_hit
from tasks.testbed.exemplars import LOOKUP_EXEMPLARS, QUERY_PREFIX, QUERY_SUFFIX, fewshot_prefix
from tasks.testbed.probe_params import ProbeParams
from tasks.testbed.problem import Problem
from tasks.testbed.records import RECORDS_HEADER, RecordDrawer

RECORDS_START = len(fewshot_prefix(LOOKUP_EXEMPLARS)) + len(QUERY_PREFIX) + len(RECORDS_HEADER)
TAIL = len("What is K7Q?") + len(QUERY_SUFFIX)
LINE_LENGTHS = (6, 7)  # "K7Q=5\n", "K7Q=42\n"


def _split(total: int, rng: random.Random) -> list[int] | None:
    """Record-line lengths (6s and 7s, shuffled) summing to ``total``; None if none do."""
    options = [b for b in range(total // 7 + 1) if (total - 7 * b) % 6 == 0]
    if not options:
        return None
    sevens = rng.choice(options)
    lengths = [7] * sevens + [6] * ((total - 7 * sevens) // 6)
    rng.shuffle(lengths)
    return lengths


def _line_start(params: ProbeParams, n: int, length: int, rng: random.Random) -> int:
    """Where the queried record's line starts, for a prompt of ``n`` tokens."""
    if params.anchor == "chunk":
        return PREFILL_CHUNK - rng.randint(1, length - 1)
    if params.anchor == "replay_start":
        return warm_hit(n) - WINDOW + params.offset - (length - 2)
    last = n - params.min_back - 1 - (length - 2)  # anchor <= n - min_back - 1
    return rng.randint(RECORDS_START, last)


def generate(params: ProbeParams, drawer: RecordDrawer, rng: random.Random) -> Problem:
    while True:  # redraw until both sides of the queried line can be filled exactly
        n = rng.choice(params.lengths)
        length = rng.choice(LINE_LENGTHS)
        start = _line_start(params, n, length, rng)
        before = _split(start - RECORDS_START, rng) if start >= RECORDS_START else None
        after = _split(n - TAIL - start - length, rng) if n - TAIL >= start + length else None
        if before is not None and after is not None:
            break
    lengths = [*before, length, *after]
    keys, _ = drawer.draw(rng, len(lengths))
    values = [str(rng.randint(0, 9) if k == 6 else rng.randint(10, params.value_max))
              for k in lengths]
    key, value = keys[len(before)], values[len(before)]
    lines = "".join(f"{k}={v}\n" for k, v in zip(keys, values, strict=True))
    return Problem(f"{RECORDS_HEADER}{lines}What is {key}?", f"{key}={value}. #### {value}")
