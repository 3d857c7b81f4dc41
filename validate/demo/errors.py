"""Errors of ``v41val demo`` that mean "the arguments are wrong"."""

from validate.errors import ValidateInputError


class DemoError(ValidateInputError):
    """A demo setting is out of range (``--items``, ``--threads``); the message names it."""
