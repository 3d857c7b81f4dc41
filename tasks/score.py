"""The verdict on one response: a 0/1 value per filter, what each filter extracted,
which filter is primary, and whether the response was unusable."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Score:
    """Scoring of one response to one item.

    ``values`` has one entry per filter for generated answers (e.g.
    ``{"strict-match": 1.0, "flexible-extract": 0.0}``) and per metric for multiple
    choice (``{"acc": 1.0, "acc_norm": 1.0}``); every value is 0.0 or 1.0, as lm-eval
    scores each document. ``extracted`` is what each filter pulled out of the response
    (``"[invalid]"`` when nothing matched; for multiple choice, the letter chosen).
    ``invalid`` is True when the primary filter found no answer (or, for multiple
    choice, a log-likelihood was NaN): health checks count these.
    """

    values: dict[str, float]
    extracted: dict[str, str]
    primary: str
    invalid: bool

    @property
    def value(self) -> float:
        return self.values[self.primary]

    def to_dict(self) -> dict:
        return {
            "values": dict(self.values),
            "extracted": dict(self.extracted),
            "primary": self.primary,
            "invalid": self.invalid,
        }
