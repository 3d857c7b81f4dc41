"""Imports every command module so that each registers itself on ``app``.

One line per command group; keep this list sorted.
"""

from validate.cli import info_cmd  # noqa: F401
