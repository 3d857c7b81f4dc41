"""Input errors of the runtime.

Every class derives from ValueError (or LookupError) and lives in this package, so the
CLI turns it into a one-line ``v41val: error: ...`` with exit code 2 instead of a
traceback. Messages name the field, tensor or file and what was expected.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A model config or runtime option is malformed (names the field)."""


class CheckpointError(ValueError):
    """A checkpoint file or tensor is missing, truncated or mis-shaped (names the tensor)."""


class StateError(ValueError):
    """A request's state was used inconsistently (e.g. tokens past the context limit,
    a snapshot from a different model, a prefix longer than the state)."""
