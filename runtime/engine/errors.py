"""Input errors of the engine and the test tokenizer.

Both derive from ValueError so that the CLI reports them as one-line
``v41val: error: ...`` messages with exit code 2 (see ``v41val/cli/common.py``).
"""

from __future__ import annotations


class EngineError(ValueError):
    """A generation request the engine cannot serve (bad field, unknown token id, ...)."""


class TokenizerError(ValueError):
    """A tokenizer file or an id/text the tokenizer cannot handle."""
