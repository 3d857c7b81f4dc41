"""Stop strings on decoded text, OpenAI/vLLM style: the output ends *before* the stop
string, which is not part of ``text`` (unless ``include``: vLLM's
``include_stop_str_in_output``); the token that completed it stays in ``token_ids``.

Only text that became final is searched (a multi-byte character still arriving is not
text yet), and each search looks only at the tail that a new token could have
completed, so the cost per token is bounded by the longest stop string.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class StopMatcher:
    stops: tuple[str, ...]
    include: bool = False
    text: str = ""
    hit: str | None = None
    hit_at: int | None = None
    _longest: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self._longest = max((len(s) for s in self.stops), default=0)

    def push(self, new_text: str, search: bool = True) -> bool:
        """Append decoded text; True when a stop string is now complete. With
        ``search=False`` the text is only appended (vLLM looks for stop strings only once
        ``min_tokens`` are out: a stop string complete before then is not one)."""
        if self.hit is not None:
            return True
        before = len(self.text)
        self.text += new_text
        if not self.stops or not new_text or not search:
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
        """The text to return: cut before the first stop string, if one was hit (after
        it with ``include``)."""
        if self.hit_at is None:
            return self.text
        return self.text[: self.hit_at + (len(self.hit) if self.include else 0)]
