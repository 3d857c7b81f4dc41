"""Synthetic tasks for the trained testbed model, in GSM8K's answer format.

Every model here has random weights, so real benchmarks sit at the floor; these tasks
are solvable by a ~4-layer, 32-token-window V4.1 model trained for minutes, and their
prompts span many windows, so the window, the compressed global path and bounded
replay all matter:

- ``testbed_lookup``: find a key's value among records, the record >= 3 windows back;
- ``testbed_arith``: a 2-3 step ``+``/``-`` chain whose inputs all sit in the last
  window, after irrelevant filler records;
- ``testbed_lookup_arith``: fetch two far-back values, then add or subtract them.

Answers are worked steps ending in ``#### N``, scored by GSM8K's strict and flexible
filters. Test sets: ``python -m tasks.testbed.generate --out tasks/data/testbed``.
Trainer API: ``TESTBED_TASKS``, ``training_example(task_name, rng)`` (see
``tasks.testbed.training``).
"""

from tasks.testbed.spec import TESTBED_TASKS
from tasks.testbed.training import TrainingExample, training_example

__all__ = ["TESTBED_TASKS", "TrainingExample", "training_example"]
