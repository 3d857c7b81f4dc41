"""Where a boundary probe puts its item: the prompt lengths it may take and where the
queried record's value ends, as a frozen dataclass (the parameters are the test set,
exactly like ``tasks/testbed/params.py``).

Positions are 0-based token indices in the rendered prompt (few-shot prefix
included); the byte tokenizer makes one ASCII character one token. The *anchor* is
the queried record's last value digit, the token the answer must copy.
"""

from __future__ import annotations

from dataclasses import dataclass

ANCHORS = ("far", "replay_start", "chunk")


@dataclass(frozen=True)
class ProbeParams:
    """``lengths``: the total prompt lengths (tokens) an item draws from.
    ``anchor``: ``far`` (the anchor at least ``min_back`` tokens before the prompt's
    end, anywhere among the records, so the answer comes through the compressed path
    as in ``testbed_lookup``), ``replay_start`` (the anchor at H - W + ``offset``,
    H the warm prefix hit), ``chunk`` (the queried record's line starts before the
    prefill chunk boundary and ends after it: 1 .. len - 1 of its tokens before it, drawn
    per item, so the boundary may fall just before its newline; ``offset`` unused)."""

    lengths: tuple[int, ...]
    anchor: str = "far"
    offset: int = 0
    min_back: int = 96
    value_max: int = 99

    def __post_init__(self) -> None:
        if not self.lengths or min(self.lengths) < 1:
            raise ValueError(f"ProbeParams: lengths must be positive and non-empty: {self}")
        if self.anchor not in ANCHORS:
            raise ValueError(f"ProbeParams: anchor must be one of {ANCHORS}: {self}")
