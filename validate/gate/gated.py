"""A comparison of two variants together with the gate's verdict on it (when a policy
was given): what ``v41val compare`` returns, whatever the outcomes' source."""

from __future__ import annotations

from dataclasses import dataclass

from validate.gate.run import RunVerdict
from validate.stats.compare import RunComparison


@dataclass(frozen=True, eq=False)
class GatedComparison:
    comparison: RunComparison
    verdict: RunVerdict | None
    plan_hash: str | None = None  # set when both variants come from one stored run

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code if self.verdict is not None else 0

    def to_dict(self) -> dict:
        doc = self.comparison.to_dict()
        if self.plan_hash is not None:
            doc = {"plan_hash": self.plan_hash, **doc}
        if self.verdict is not None:
            doc["gate"] = self.verdict.to_dict()
        return doc

    def report(self) -> str:
        text = self.comparison.report()
        if self.plan_hash is not None:
            text = f"plan {self.plan_hash[:12]}\n" + text
        return text if self.verdict is None else text + "\n\n" + self.verdict.report()
