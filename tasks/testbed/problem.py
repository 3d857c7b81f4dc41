"""One generated problem: the question text and its worked answer.

The answer follows GSM8K's convention (worked steps, then ``#### N``), so the
existing GSM8K filters and ``exact_match`` score it unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """``question`` is what goes between ``Question: `` and ``\\nAnswer:``;
    ``answer`` is the worked answer without the leading space the prompt's target
    delimiter adds (e.g. ``"12+7=19. 19-4=15. #### 15"``)."""

    question: str
    answer: str

    @property
    def final_answer(self) -> str:
        return self.answer.split("####")[-1].strip()
