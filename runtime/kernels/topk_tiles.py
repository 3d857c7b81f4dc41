"""When the fused top-k (``runtime/kernels/topk.py``) splits a row over programs, and how.

Why split at all: the radix select is one program per row, and that program reads its
whole row twice and runs eleven dependent histogram passes. At 128k keys one row took
0.10 ms on the H200 whether there were 1, 8 or 64 rows (benchmarks/results/topk_h200.md):
a decode step at batch 1 had one SM working. Split, each row is cut into C chunks of
``chunk`` keys, one program per (row, chunk) selects its chunk's top-k with the same rule,
and a second launch selects the row's top-k among the C x k candidates (topk.py proves
the result is the same ids).

Why a table and not a formula: the cost is two terms that pull apart, one program's chunk
(about ``chunk`` keys read twice) and the second pass over ``C x k`` candidates, plus a
fixed latency per pass that only the GPU can tell. Each row of ``SPLIT_TABLE`` gives, for
k up to ``max_k``, the chunk length and the interleaved groups both passes use (group
maxima bound the k-th key; ``groups`` about 2 x k keeps that bound tight while the four
passes over the maxima stay short). The first rows are the balance point of the two
terms at 128k keys (chunk ~ sqrt(N x k)), chosen by that argument; on the H200
(benchmarks/results/topk_h200_split.md) the k = 512 row is the best forced chunk on tie-free
scores (2.9x the one pass at 128k keys) and the k = 1024 / 2048 rows gain 1.9x / 1.5x there,
while on scores that are ~98 % exact zeros they gain nothing or lose (1.0x / 0.7x / 0.5x).
``benchmarks/topk.py --chunks`` times other chunk lengths next to them; a row edited here
is the whole change.

When: a call splits only while it has fewer than ``programs`` (row, chunk) programs, so a
prefill of many rows keeps the one-pass kernel (its programs already fill the GPU), and
only into as many chunks as leave the second pass no more than ``1 / min_shrink`` of the
row. Pure arithmetic on ints, tested without running a kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from runtime.kernels.backend import next_pow2

RESIDENT_MAX = 16384  # keys per program of the resident select: registers, and its packed scan's 16-bit fields
SMALLEST = 32  # the radix select's bins (topk_radix.RADIX_BINS): no tile or group count below it


def require_powers_of_two(config: object, names: tuple[str, ...]) -> None:
    """ValueError naming ``Class.field`` unless each field is a power of two >= SMALLEST."""
    for name in names:
        value = getattr(config, name)
        if value < SMALLEST or value != next_pow2(value):
            raise ValueError(f"{type(config).__name__}.{name}: expected a power of two >= {SMALLEST}, got {value}")


@dataclass(frozen=True)
class SplitRow:
    """For k <= ``max_k``: chunks of ``chunk`` keys, ``groups`` interleaved groups and
    ``num_warps`` warps per program in both passes."""

    max_k: int
    chunk: int
    groups: int
    num_warps: int = 8

    def __post_init__(self) -> None:
        require_powers_of_two(self, ("chunk", "groups"))
        if self.max_k < 1:
            raise ValueError(f"SplitRow.max_k: expected >= 1, got {self.max_k}")
        if self.num_warps not in (1, 2, 4, 8, 16, 32):
            raise ValueError(f"SplitRow.num_warps: expected a power of two of 1-32, got {self.num_warps}")


SPLIT_TABLE: tuple[SplitRow, ...] = (
    SplitRow(max_k=512, chunk=8192, groups=1024),  # 128k keys: 16 chunks, 8192 candidates
    SplitRow(max_k=1024, chunk=16384, groups=2048),  # 128k keys: 8 chunks, 8192 candidates
    SplitRow(max_k=2048, chunk=16384, groups=4096),  # 128k keys: 8 chunks, 16384 candidates
)


@dataclass(frozen=True)
class RowBound:
    """The row-bound select's split and sizes (runtime/kernels/topk_rowbound.py says why the
    form). ``chunk``: keys per program; ``programs``: rows x chunks at most (fewer chunks,
    each longer, past it); ``longest``: a row whose chunks would grow past this runs the
    chained split instead. On the H200 (benchmarks/results/topk_h200_rowbound.md and
    topk_h200_rowbound_2.md, two runs, every row exact; the chained split's times first): at
    k = 512 and 64k / 128k keys, one row, chunks of 4,096 keys 29.6 / 33.2 -> 22.9 / 22.6 us
    (8,192: 25.9 / 25.6; 16,384: 36.1 / 35.9); k = 1,024 48.8 / 51.5 -> 36.9 / 37.6; k =
    2,048 66.6 / 71.7 -> 46.8 / 47.9; 2-4 rows the same; ReLU'd scores (mostly exact zeros)
    74.5 / 95.8 -> 21.9 / 22.6 us at k = 512. With 8 rows of 128k keys 32 chunks of 4,096
    (256 programs) took 32.4 us and 16 of 8,192 (128 programs) 26.9, so 128 programs at
    most; 16,384-key chunks lost to the chained split at one row (35.9 vs 33.2 us), so
    chunks of at most 8,192. Whether to split at all stays the chained policy's rule (the
    shapes where splitting was timed against the one-pass kernel).

    ``maxima_per_k``: the row's group maxima (which bound its k-th key) per k, at most
    ``max_maxima`` (one register tile of a program); ``list_per_k``: the candidates the
    row's last program selects among in registers, per k, at most ``max_list`` (more
    candidates: it passes over the row in memory, ``block`` keys a step). With G maxima of
    N / G keys each, the need-th largest maximum sits near the row's need-th key once G is
    several times k; fewer maxima loosen the bound a little and shorten launch B's three
    passes over them. Recomputed on the CPU for N(0, 1) rows of 131,072 keys in the default
    32 chunks of 4,096 (benchmarks/results/topk_bound_cpu.md, 5 rows each): with 4 maxima per
    k 595-640 keys above the bound at k = 512, 1,161-1,290 at 1,024 and 2,365-2,515 at 2,048
    (8 per k, session 24's run of that file: 536-577, 1,151-1,171 and 2,330-2,422). Where
    the best keys cluster the bound loosens: the row's last 4,096 keys 3 standard deviations
    higher (a recent window scoring high) leave 3,118-3,206 keys above it at k = 512 (8 per
    k: 2,568-2,655), past the first tile, within the whole 4k one (``list_per_k`` 8).

    ``first_list_per_k``: rows listing at most that many keys per k (as a power of two) run
    the last program's passes in that smaller tile, the others in the ``list_per_k`` one
    (0: one tile for every row): 2 gives 1,024 slots for the keys of N(0, 1) rows at k =
    512, where the whole tile has 4,096 (runtime/kernels/topk_rowbound.py says why a pass
    costs per slot).

    Measured on an H100 (session 28, benchmarks/results/topk_h100_first_tile_1.md and
    topk_h100_first_tile_2.md: ``benchmarks/topk.py --row-bound``, 24 split shapes of 64k and
    128k keys, 1-8 rows, k = 512-2,048, every row exact in both runs): the first tile took
    0.51-0.77x one tile's time at every shape of both runs, and 4 maxima per k instead of 8
    (with the first tile) 0.87-1.01x of that (k = 2,048: the same launch, 8,192 maxima
    either way). One row of 128k keys, one tile -> first tile -> and 4 maxima: k = 512 22.1
    -> 16.2 -> 14.1 us, k = 1,024 37.3 -> 20.9 -> 18.6, k = 2,048 47.2 -> 24.4 (run 1), so
    both are the defaults."""

    chunk: int = 4096
    programs: int = 128
    longest: int = 8192
    maxima_per_k: int = 4
    list_per_k: int = 8
    max_maxima: int = 8192
    max_list: int = RESIDENT_MAX
    block: int = 1024
    first_list_per_k: int = 2

    def __post_init__(self) -> None:
        for name in ("programs", "maxima_per_k", "list_per_k"):
            if getattr(self, name) < 1:
                raise ValueError(f"RowBound.{name}: expected >= 1, got {getattr(self, name)}")
        if self.first_list_per_k < 0:
            raise ValueError(f"RowBound.first_list_per_k: expected >= 0 (0: one tile), got {self.first_list_per_k}")
        require_powers_of_two(self, ("chunk", "longest", "max_maxima", "max_list", "block"))
        if not self.chunk <= self.longest <= RESIDENT_MAX:
            raise ValueError(f"RowBound: expected chunk <= longest <= {RESIDENT_MAX} (one program's tile), got "
                             f"{self.chunk} and {self.longest}")
        if self.max_list > RESIDENT_MAX:
            raise ValueError(f"RowBound.max_list: expected at most {RESIDENT_MAX} (one register tile), "
                             f"got {self.max_list}")

    def split(self, t: int, n: int) -> tuple[int, int] | None:
        """(chunks, chunk) of a [t, n] call: ``chunk``-key chunks, fewer and longer past
        ``programs``; None when that leaves fewer than 2 chunks or chunks past ``longest``."""
        chunks = min(-(-n // self.chunk), self.programs // max(1, t))
        if chunks < 2:
            return None
        chunk = -(-n // chunks)
        return (-(-n // chunk), chunk) if chunk <= self.longest else None

    def groups(self, chunks: int, chunk: int, k: int) -> int:
        """Interleaved groups per chunk: the row's maxima (a power of two near
        ``maxima_per_k`` x k) shared out over the chunks (counted to a power of two), at
        most one per key of the chunk's tile."""
        maxima = min(self.max_maxima, max(SMALLEST, next_pow2(self.maxima_per_k * k)))
        return max(1, min(next_pow2(chunk), maxima // next_pow2(chunks)))

    def list_keys(self, k: int) -> int:
        """Candidates the last program holds in registers: at least k (a row's answer when
        its k-th key ties with the bound must fit there; ValueError beyond ``max_list``)."""
        keys = min(self.max_list, max(SMALLEST, next_pow2(self.list_per_k * k)))
        if keys < k:
            raise ValueError(f"RowBound: k = {k} does not fit the {keys}-key candidate tile (max_list {self.max_list})")
        return keys

    def first_list_keys(self, k: int) -> int:
        """The smaller register tile the last program selects in when the row lists at
        most that many keys: ``first_list_per_k`` x k as a power of two, at least k's, at
        most ``list_keys`` (equal to it: one tile; ``first_list_per_k`` 0 always)."""
        whole = self.list_keys(k)
        if self.first_list_per_k == 0:
            return whole
        return min(whole, max(SMALLEST, next_pow2(self.first_list_per_k * k)))  # >= k's: per_k >= 1


@dataclass(frozen=True)
class TopkSplit:
    """One call's split: ``chunks`` programs per row of ``chunk`` keys each (the last one
    shorter), ``groups`` interleaved groups and ``num_warps`` warps per program in both
    passes. ``ONE_PASS`` (``chunk == 0``): the one-pass kernel with its own tiling.
    ``resident``: both launches run the register-resident select
    (runtime/kernels/topk_resident.py; ``groups`` bound its candidate lists), one launch
    when ``chunks`` is 1; ``one_launch`` (resident only): the chunks' launch alone, each
    row's last chunk program (a ticket) selecting among the row's candidates.
    ``row_bound``: the chunks run the row-bound select in three launches
    (runtime/kernels/topk_rowbound.py, with these sizes; ``groups`` unused)."""

    chunks: int
    chunk: int
    groups: int
    num_warps: int = 8
    resident: bool = False
    one_launch: bool = False
    row_bound: RowBound | None = None

    def candidates(self, k: int) -> int:
        """Candidates per row the second pass reads: k from every chunk."""
        return self.chunks * k


ONE_PASS = TopkSplit(1, 0, 0)


@dataclass(frozen=True)
class TopkSplitPolicy:
    """``programs``: split only while rows x chunks stays below this (about two per SM of
    an H200, 132 SMs); ``min_shrink``: the candidates of a row (chunks x k) are at most
    1 / min_shrink of the row, else fewer chunks; ``table``: rows by k (ascending
    ``max_k``), ``SPLIT_TABLE`` by default; k above the last row never splits.
    ``programs=0`` never splits (the one-pass kernel, kept to measure against).

    ``resident``: a split whose chunk and candidate row both fit ``resident_keys`` keys
    (rounded up to a power of two, at most ``RESIDENT_MAX``) runs the
    register-resident select, and so does a row of at most ``resident_keys`` keys that
    would not split (one program per row, one launch). Off by default until the H200 has
    timed it against the chained kernel (``benchmarks/topk.py --resident``).
    ``resident_one_launch``: those resident splits as one launch (``TopkSplit.one_launch``:
    no launch boundary between the chunks and the candidates, one program per row finishing
    after the row's others). ``dependent_select``: a split's second launch (the candidates'
    select) is launched dependent on the first (Hopper's programmatic dependent launch,
    runtime/kernels/pdl.py; CUDA only; off until timed; with ``row_bound``, each of its
    three launches after the first). ``row_bound``: a split whose chunk fits one program's
    register tile (``resident_keys``) runs the row-bound select with these sizes
    (runtime/kernels/topk_rowbound.py): 3 radix passes over the row's group maxima and at
    most 7 over its final candidates, where the chained split runs 11 in each of its two
    launches. Where the chained rule splits a row, the row-bound select cuts it as
    ``RowBound.split`` says (its own chunk length: no second pass over chunks x k
    candidates); where that gives no split, the chained split runs. The default since the
    H200 timed it faster at every split shape (``RowBound`` has the numbers); None: the
    chained split everywhere (``CHAINED``); not with ``resident``."""

    programs: int = 256
    min_shrink: int = 4
    table: tuple[SplitRow, ...] = SPLIT_TABLE
    resident: bool = False
    resident_keys: int = RESIDENT_MAX
    resident_one_launch: bool = False
    dependent_select: bool = False
    row_bound: RowBound | None = RowBound()

    def __post_init__(self) -> None:
        if self.programs < 0 or self.min_shrink < 1:
            raise ValueError(f"TopkSplitPolicy: expected programs >= 0 and min_shrink >= 1, got "
                             f"{self.programs}, {self.min_shrink}")
        if [r.max_k for r in self.table] != sorted({r.max_k for r in self.table}):
            raise ValueError("TopkSplitPolicy.table: expected rows in ascending, distinct max_k")
        if self.resident and self.row_bound is not None:
            raise ValueError("TopkSplitPolicy: expected at most one of resident and row_bound (row_bound is on by "
                             "default: pass row_bound=None with resident=True)")
        if not SMALLEST <= self.resident_keys <= RESIDENT_MAX:
            raise ValueError(f"TopkSplitPolicy.resident_keys: expected {SMALLEST}-{RESIDENT_MAX}, "
                             f"got {self.resident_keys}")

    def row_for(self, k: int) -> SplitRow | None:
        return next((r for r in self.table if k <= r.max_k), None)

    def split(self, t: int, n: int, k: int) -> TopkSplit:
        """The split of a [t, n] call selecting k per row."""
        row = self.row_for(k)
        if row is None or t <= 0 or n <= 0 or k <= 0:
            return ONE_PASS
        chunks = min(-(-n // row.chunk), self.programs // t, n // (self.min_shrink * k))
        if chunks < 2:
            if self.resident and self.fits(n):
                return TopkSplit(1, n, row.groups, row.num_warps, resident=True)
            return ONE_PASS
        bounded = None if self.row_bound is None else self.row_bound.split(t, n)
        if bounded is not None and self.fits(bounded[1]):
            return TopkSplit(*bounded, row.groups, row.num_warps, row_bound=self.row_bound)
        chunk = -(-n // chunks)
        split = TopkSplit(-(-n // chunk), chunk, row.groups, row.num_warps)  # no empty last chunk
        if self.resident and self.fits(split.chunk) and self.fits(split.candidates(k)):
            return replace(split, resident=True, one_launch=self.resident_one_launch)
        return split

    def fits(self, keys: int) -> bool:
        """Whether one program of the resident select holds ``keys`` keys."""
        return next_pow2(keys) <= self.resident_keys


CHAINED = TopkSplitPolicy(row_bound=None)  # the chained split everywhere: what the row-bound one is timed against
