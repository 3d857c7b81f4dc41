"""Errors of the tasks package that mean "the input is wrong", not "the code is wrong".

The CLI turns any of these into ``v41val: error: <one line>`` and exit code 2 (see
``v41val.cli.common.is_user_error``): a missing or altered data file, an unknown task
or item name, or a response of the wrong shape handed to ``Task.score``.
"""

from __future__ import annotations


class TaskDataError(OSError):
    """A shipped data file is missing, unreadable, or fails its sha256 check."""


class UnknownTaskError(LookupError):
    """No task variant has the requested name."""


class UnknownItemError(LookupError):
    """The task has no item with the requested id."""


class ResponseShapeError(ValueError):
    """A response does not fit the request: wrong type, or wrong number of choices."""


class TaskConfigError(ValueError):
    """A task option is out of range (e.g. a non-positive ``max_gen_toks``)."""
