"""Every generated testbed task by name: the three training tasks and the boundary
probes. The probes are evaluation-only, so the trainer's ``TESTBED_TASKS`` (in
``spec``) does not list them; test sets, data files and task objects look names up
here."""

from __future__ import annotations

from tasks.testbed.probe_spec import PROBE_SPECS, PROBE_TASKS
from tasks.testbed.spec import SPECS, TESTBED_TASKS

ALL_SPECS = {**SPECS, **PROBE_SPECS}
ALL_TASKS = (*TESTBED_TASKS, *PROBE_TASKS)
