"""Imports every command module so that each registers itself on ``app``.

One line per command group; keep this list sorted.
"""

import v41val.cli.calibrate_cmd  # noqa: F401
import v41val.cli.compare_cmd  # noqa: F401
import v41val.cli.demo_cmd  # noqa: F401
import v41val.cli.gate_cmd  # noqa: F401
import v41val.cli.history_cmd  # noqa: F401
import v41val.cli.import_cmd  # noqa: F401
import v41val.cli.plan_cmd  # noqa: F401
import v41val.cli.report_cmd  # noqa: F401
import v41val.cli.run_cmd  # noqa: F401
import v41val.cli.runtime_cmd  # noqa: F401
import v41val.cli.serve_cmd  # noqa: F401
import v41val.cli.tasks_cmd  # noqa: F401
from v41val.cli import info_cmd  # noqa: F401
