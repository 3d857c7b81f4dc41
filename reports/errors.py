"""Errors of the reports package that mean "the user's input is wrong".

They derive from ValueError / LookupError so the CLI prints them as one line and exits 2
(``v41val.cli.common.is_user_error`` recognises classes defined in ``reports``).
"""


class ReportInputError(ValueError):
    """A report cannot be produced from what was given (bad document, bad option)."""


class OutputPathError(ReportInputError):
    """An output path would escape the directory the user chose."""


class UnknownRunError(LookupError):
    """No run with this id (or plan hash) is in the results store."""
