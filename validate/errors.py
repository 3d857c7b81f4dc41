"""Errors of the validate package that mean "the user's input is wrong".

The CLI turns any error class defined in v41val's own packages (runtime, tasks,
validate, reports) into a one-line message and exit code 2; see
``v41val.cli.common.is_user_error``.
"""


class ValidateInputError(ValueError):
    """A plan, policy, results file or argument is malformed; the message names it."""


class PolicyError(ValidateInputError):
    """A gate policy file is malformed; the message names the file and the field."""


class SamplesFileError(ValidateInputError):
    """An lm-eval ``--log_samples`` file or directory cannot be read as per-item outcomes."""


class PairingError(ValidateInputError):
    """Two variants' outcomes cannot be paired (different prompts for one item, no overlap)."""


class StatsInputError(ValidateInputError):
    """Arguments to a statistic are out of range (alpha outside (0, 1), empty data, ...)."""


class HistoryInputError(ValidateInputError):
    """A history option (window, alpha, --since, plan name) is out of range or unknown."""


class PlanError(ValidateInputError):
    """A plan file is malformed; the message names the file and the field."""
