"""How many torch CPU threads a user may ask for: one check, one message, for ``v41val
demo --threads`` and the lm-eval model arg ``threads`` (``validate.lmeval_model``).

``torch.set_num_threads(100000)`` crashes the process (a segfault, no message), and more
threads than a few per core never helps, so anything past ``MAX_THREADS_PER_CORE`` per
core of this machine is refused, as is anything below 1.
"""

from __future__ import annotations

import os

from validate.errors import ValidateInputError

MAX_THREADS_PER_CORE = 4


def most_threads() -> int:
    return MAX_THREADS_PER_CORE * (os.cpu_count() or 1)


def check_threads(value: object, field: str,
                  error: type[ValidateInputError] = ValidateInputError) -> int:
    """``value`` (an int, or its decimal text as lm-eval passes model args) as a thread
    count in [1, most_threads()]; else ``error`` naming ``field``."""
    count = None
    if isinstance(value, int) and not isinstance(value, bool):
        count = value
    elif isinstance(value, str) and value.strip().isdigit():
        count = int(value)
    most = most_threads()
    if count is None or not 1 <= count <= most:
        raise error(f"{field}: expected 1 to {most} ({MAX_THREADS_PER_CORE} per core of this "
                    f"machine), got {value!r}")
    return count
