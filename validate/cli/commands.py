"""Imports every command module so that each registers itself on ``app``.

One line per command group; keep this list sorted.
"""

import validate.cli.calibrate_cmd  # noqa: F401
import validate.cli.compare_cmd  # noqa: F401
import validate.cli.demo_cmd  # noqa: F401
import validate.cli.gate_cmd  # noqa: F401
import validate.cli.history_cmd  # noqa: F401
import validate.cli.import_cmd  # noqa: F401
import validate.cli.plan_cmd  # noqa: F401
import validate.cli.report_cmd  # noqa: F401
import validate.cli.run_cmd  # noqa: F401
import validate.cli.runtime_cmd  # noqa: F401
import validate.cli.serve_cmd  # noqa: F401
import validate.cli.tasks_cmd  # noqa: F401
from validate.cli import info_cmd  # noqa: F401
