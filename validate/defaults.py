"""Default paths and sizes that ``v41val --help`` shows.

They live here, in a module that imports nothing but ``pathlib``, because typer builds
every command's signature when the CLI starts: importing them from the modules that use
them (the runner, the demo) would load scipy, torch and the task data just to print
``--help``. Those modules re-export them under their historical names.
"""

from __future__ import annotations

from pathlib import Path

RUN_WORKSPACE = Path(".v41val")  # where ``v41val run`` keeps its results store
STORE_NAME = "results.sqlite"  # the results store's file name inside a workspace
DEMO_WORKSPACE = Path(".v41val/demo")  # ``v41val demo``'s own workspace
DEMO_ITEMS = 90  # testbed items of the demo plan by default (split evenly over its three tasks)
