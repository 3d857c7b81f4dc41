"""What a model did, counted by the model itself: prefix hits it adopted, tokens it
replayed, prefill chunks and rows its decoder trim dropped, decode tokens it ran on the
static slab or replayed from CUDA graphs.

Why the model keeps its own totals: the engagement ledger (``validate.store``'s
``engagement`` table) is built per request from each request's state; these totals are
counted at the same decisions but summed over everything the model ran, so a test can
hold the ledger to "what the runtime did" instead of to itself. One instance per model,
mutated only by that model (no module-level state).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class ModelCounters:
    """Running totals since the model was built (or since ``reset``)."""

    prefix_hits: int = 0  # snapshots adopted (a hit the mode ignored does not count)
    hit_tokens: int = 0  # tokens those snapshots covered
    replayed_tokens: int = 0  # cached tokens fed again by bounded replay
    trimmed_chunks: int = 0  # prefill chunks whose trimmed layers dropped rows
    trimmed_rows: int = 0  # rows those layers did not run on
    static_decode_tokens: int = 0  # decode tokens run on the static slab (decode = static | graphs)
    graph_replays: int = 0  # decode steps replayed from a CUDA graph (decode = graphs)
    static_fallback_tokens: int = 0  # decode tokens the static path could not take (slab too short)

    def snapshot(self) -> dict[str, int]:
        return asdict(self)

    def since(self, before: dict[str, int]) -> dict[str, int]:
        """What was counted after ``before`` (a ``snapshot``)."""
        return {k: v - before[k] for k, v in self.snapshot().items()}

    def reset(self) -> None:
        for name in self.snapshot():
            setattr(self, name, 0)
