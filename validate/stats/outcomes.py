"""Per-item outcome tables, the input every statistic in this package takes.

The unit of comparison is the item (principle 1 of docs/design.md): the same prompt under
variant A and variant B. Any source can produce an ``ItemOutcomes`` table (lm-eval
``--log_samples`` files today via ``validate.lmeval_samples``, the results store later);
``pair_outcomes`` joins two of them by (item id, repeat) and refuses to pair an item
whose prompt hash differs between the two, because a silent pairing of different
prompts would make every paired statistic meaningless.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from validate.errors import PairingError, StatsInputError


@dataclass(frozen=True, eq=False)
class ItemOutcomes:
    """One variant's outcomes on one (task, metric): one row per (item, repeat).

    ``values`` are per-row scores (0/1 for accuracy, any float for latency or KL).
    ``prompt_hashes`` (optional, one per row) guard the pairing.
    """

    label: str
    task: str
    metric: str
    item_ids: tuple[str, ...]
    repeats: tuple[int, ...]
    values: np.ndarray  # (rows,) float64
    prompt_hashes: tuple[str | None, ...] | None = None

    def __post_init__(self) -> None:
        rows = len(self.item_ids)
        values = np.asarray(self.values, dtype=np.float64).reshape(-1)
        object.__setattr__(self, "values", values)
        if len(self.repeats) != rows or values.shape[0] != rows:
            raise StatsInputError(
                f"{self.label}: item_ids, repeats and values must have one entry per row "
                f"(got {rows}, {len(self.repeats)}, {values.shape[0]})"
            )
        if self.prompt_hashes is not None and len(self.prompt_hashes) != rows:
            raise StatsInputError(f"{self.label}: prompt_hashes must have one entry per row")
        keys = set(zip(self.item_ids, self.repeats, strict=True))
        if len(keys) != rows:
            raise StatsInputError(f"{self.label}: duplicate (item, repeat) rows in {self.task}")
        if not np.all(np.isfinite(values)):
            raise StatsInputError(f"{self.label}: non-finite outcome in {self.task}/{self.metric}")

    @classmethod
    def single(
        cls, label: str, task: str, metric: str, values, item_ids=None, prompt_hashes=None
    ) -> ItemOutcomes:
        """One outcome per item (no repeats); item ids default to 0..n-1."""
        values = np.asarray(values, dtype=np.float64).reshape(-1)
        ids = tuple(str(i) for i in (range(len(values)) if item_ids is None else item_ids))
        hashes = None if prompt_hashes is None else tuple(prompt_hashes)
        return cls(label, task, metric, ids, (0,) * len(ids), values, hashes)

    @property
    def n_rows(self) -> int:
        return len(self.item_ids)


@dataclass(frozen=True, eq=False)
class PairedOutcomes:
    """Rows present in both variants, aligned: ``a[i]`` and ``b[i]`` are the same
    (item, repeat). ``clusters[i]`` numbers the item (0..n_items-1), so repeats of one
    item share a cluster; resampling and clustered SEs use it."""

    task: str
    metric: str
    label_a: str
    label_b: str
    item_ids: tuple[str, ...]
    repeats: tuple[int, ...]
    a: np.ndarray  # (rows,) float64
    b: np.ndarray  # (rows,) float64
    clusters: np.ndarray  # (rows,) int64, item index
    only_in_a: tuple[str, ...] = field(default=())
    only_in_b: tuple[str, ...] = field(default=())

    @property
    def n_rows(self) -> int:
        return int(self.a.shape[0])

    @property
    def n_items(self) -> int:
        return int(self.clusters.max()) + 1 if self.n_rows else 0

    @property
    def has_repeats(self) -> bool:
        return self.n_rows > self.n_items

    @property
    def is_binary(self) -> bool:
        both = np.concatenate([self.a, self.b])
        return bool(np.all((both == 0.0) | (both == 1.0)))

    @property
    def coverage(self) -> float:
        """Share of the baseline's (item, repeat) rows that the candidate also has."""
        total = self.n_rows + len(self.only_in_a)
        return self.n_rows / total if total else 0.0

    @classmethod
    def from_arrays(
        cls, a, b, clusters=None, task: str = "task", metric: str = "metric",
        label_a: str = "A", label_b: str = "B",
    ) -> PairedOutcomes:
        """Aligned arrays (tests, simulations); ``clusters`` defaults to one item per row."""
        a = np.asarray(a, dtype=np.float64).reshape(-1)
        b = np.asarray(b, dtype=np.float64).reshape(-1)
        if a.shape != b.shape or a.size == 0:
            raise StatsInputError("paired arrays must be non-empty and of equal length")
        if clusters is None:
            codes = np.arange(a.size, dtype=np.int64)
        else:
            _, codes = np.unique(np.asarray(clusters), return_inverse=True)
            codes = codes.astype(np.int64).reshape(-1)
        ids = tuple(str(c) for c in codes)
        reps = _repeat_numbers(codes)
        return cls(task, metric, label_a, label_b, ids, reps, a, b, codes)


def _repeat_numbers(codes: np.ndarray) -> tuple[int, ...]:
    seen: dict[int, int] = {}
    out = []
    for c in codes.tolist():
        out.append(seen.get(c, 0))
        seen[c] = seen.get(c, 0) + 1
    return tuple(out)


def pair_outcomes(a: ItemOutcomes, b: ItemOutcomes) -> PairedOutcomes:
    """Join two variants' tables on (item id, repeat).

    Rows only one side has are listed (``only_in_a``/``only_in_b``) so coverage can be
    checked; they are never silently dropped from the record. A prompt-hash mismatch on
    a shared item raises ``PairingError`` naming the item.
    """
    if (a.task, a.metric) != (b.task, b.metric):
        raise PairingError(
            f"cannot pair {a.task}/{a.metric} ({a.label}) with {b.task}/{b.metric} ({b.label})"
        )
    index_b = {key: i for i, key in enumerate(zip(b.item_ids, b.repeats, strict=True))}
    rows_a, rows_b, only_a = [], [], []
    for i, key in enumerate(zip(a.item_ids, a.repeats, strict=True)):
        j = index_b.get(key)
        if j is None:
            only_a.append(f"{key[0]}#{key[1]}")
            continue
        ha = a.prompt_hashes[i] if a.prompt_hashes is not None else None
        hb = b.prompt_hashes[j] if b.prompt_hashes is not None else None
        if ha is not None and hb is not None and ha != hb:
            raise PairingError(
                f"{a.task}: item {key[0]} has different prompts in {a.label} and {b.label} "
                f"(prompt_hash {ha[:12]} vs {hb[:12]}); refusing to pair"
            )
        rows_a.append(i)
        rows_b.append(j)
    matched_b = set(rows_b)
    only_b = [
        f"{iid}#{rep}"
        for j, (iid, rep) in enumerate(zip(b.item_ids, b.repeats, strict=True))
        if j not in matched_b
    ]
    if not rows_a:
        raise PairingError(f"{a.task}/{a.metric}: {a.label} and {b.label} share no items")
    ids = [a.item_ids[i] for i in rows_a]
    _, codes = np.unique(np.asarray(ids, dtype=object).astype(str), return_inverse=True)
    return PairedOutcomes(
        task=a.task,
        metric=a.metric,
        label_a=a.label,
        label_b=b.label,
        item_ids=tuple(ids),
        repeats=tuple(a.repeats[i] for i in rows_a),
        a=a.values[rows_a],
        b=b.values[rows_b],
        clusters=codes.astype(np.int64).reshape(-1),
        only_in_a=tuple(only_a),
        only_in_b=tuple(only_b),
    )
