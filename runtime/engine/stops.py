"""Stop strings on decoded text, OpenAI/vLLM style: the output ends *before* the stop
string, which is not part of ``text``; the token that completed it stays in
``token_ids``.

Only text that became final is searched (a multi-byte character still arriving is not
text yet), and each search looks only at the tail that a new token could have
completed, so the cost per token is bounded by the longest stop string.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class StopMatcher:
    stops: tuple[str, ...]
    text: str = ""
    hit: str | None = None
    hit_at: int | None = None
    _longest: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self._longest = max((len(s) for s in self.stops), default=0)

    def push(self, new_text: str) -> bool:
        """Append decoded text; True when a stop string is now complete."""
        if self.hit is not None:
            return True
        before = len(self.text)
        self.text += new_text
        if not self.stops or not new_text:
            return False
        start = max(0, before - self._longest + 1)
        best: tuple[int, str] | None = None
        for s in self.stops:
            at = self.text.find(s, start)
            if at >= 0 and (best is None or at < best[0]):
                best = (at, s)
        if best is None:
            return False
        self.hit_at, self.hit = best
        return True

    def output_text(self) -> str:
        """The text to return: cut before the first stop string, if one was hit."""
        return self.text if self.hit_at is None else self.text[: self.hit_at]
