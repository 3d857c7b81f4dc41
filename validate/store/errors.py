"""Errors of the results store; each message is one line naming the file."""

from __future__ import annotations

from validate.errors import ValidateInputError


class StoreError(ValidateInputError):
    """The results file is not a v41val store, has an unknown schema, or contradicts
    the plan (e.g. a stored prompt differs from the one the plan renders now)."""


class StoreBusyError(OSError):
    """Another writer held the database lock past every retry."""
