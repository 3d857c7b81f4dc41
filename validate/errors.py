"""Errors of the validate package that mean "the user's input is wrong".

The CLI turns any error class defined in v41val's own packages (runtime, tasks,
validate, reports) into a one-line message and exit code 2; see
``validate.cli.common.is_user_error``.
"""


class ValidateInputError(ValueError):
    """A plan, policy, results file or argument is malformed; the message names it."""
