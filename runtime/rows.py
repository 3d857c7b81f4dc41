"""The packed row set of one forward step: which rows belong to which request.

Rows of all chunks are concatenated (request order), then padded with dummy rows to the
row tile in batch-invariant mode. Per-request work (window KV writes, compressor,
indexer, attention) runs on each segment; dense work (projections, mHC, MoE) runs on
all rows at once. Decoder trimming builds a smaller row set from the kept rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from runtime.state import SequenceState


@dataclass
class Segment:
    """One request's rows in the current row set."""

    state: SequenceState
    positions: torch.Tensor  # int64 [T] absolute positions
    row0: int  # first row in the packed set
    floor: int  # lowest position window attention may read in the current layers
    trim: bool  # decoder-trimmed at the cut
    chunk_end: int  # position after the chunk's last token
    # Published by the latest index source (rows aligned with ``positions``):
    topk: torch.Tensor | None = None  # [T, index_topk] entry ids, -1 = empty
    candidates: torch.Tensor | None = None  # [T, candidate_topk_blocks] block ids, -1 = none

    @property
    def n(self) -> int:
        return self.positions.shape[0]

    @property
    def rows(self) -> slice:
        return slice(self.row0, self.row0 + self.n)


@dataclass
class RowSet:
    segments: list[Segment]
    total: int  # rows including padding
    positions: torch.Tensor = field(init=False)  # [total], dummy rows at position 0

    def __post_init__(self) -> None:
        device = self.segments[0].positions.device if self.segments else "cpu"
        pos = torch.zeros(self.total, dtype=torch.int64, device=device)
        for seg in self.segments:
            pos[seg.rows] = seg.positions
        self.positions = pos


def trimmed(rows: RowSet, window: int, padded_rows) -> tuple[RowSet, torch.Tensor]:
    """Keep each trimmed segment's last min(T, W) rows; returns the new set and the
    gather index into the old rows. Trimmed segments' window reads are clamped at
    chunk_end - W (what vLLM does for replay layers)."""
    keep_idx, segments, row0 = [], [], 0
    for seg in rows.segments:
        first = max(0, seg.n - window) if seg.trim else 0
        keep = torch.arange(seg.row0 + first, seg.row0 + seg.n, device=rows.positions.device)
        keep_idx.append(keep)
        floor = max(seg.floor, seg.chunk_end - window) if seg.trim else seg.floor
        segments.append(Segment(
            state=seg.state, positions=seg.positions[first:], row0=row0, floor=floor, trim=seg.trim,
            chunk_end=seg.chunk_end,
            topk=None if seg.topk is None else seg.topk[first:],
            candidates=None if seg.candidates is None else seg.candidates[first:],
        ))
        row0 += seg.n - first
    index = torch.cat(keep_idx)
    total = padded_rows(row0)
    if total > row0:  # dummy rows: repeat row 0 of the old set (their results are dropped)
        index = torch.cat([index, index.new_zeros(total - row0)])
    return RowSet(segments, total), index
