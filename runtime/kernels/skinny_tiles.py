"""How the skinny GEMMs of decode (``runtime/kernels/skinny.py``, ``experts.py``) tile a call.

Why: at decode a projection is [M, K] x [K, N] with M = 1-64 rows, so it is a read of the
weight. cuBLAS's choice for one row of ``mid`` ([1, 2048] x [2048, 512], 2 MiB) took 5.3 us
on the H200 (0.4 TB/s, against 0.5 us of bandwidth) and [1, 2048] x [2048, 1024] 12.4 us:
its tiles gave 8-16 programs for the whole weight, so a few SMs read it alone
(benchmarks/results/step_profile_h200.md). Here the grid is (output tiles, K splits)
sized to keep about ``programs`` programs in flight: each program reads a [BLOCK_N, split]
slab of the weight once; with more than one split the programs write float32 partials
and the last one per tile sums them in split order (``runtime/kernels/tickets.py``).

- ``SkinnyPolicy``: plain and grouped projections; one row (``block_m`` 1) runs as
  multiply-adds on the CUDA cores, more rows as ``tl.dot`` tiles of 16-64 rows (the weight
  is then read once per row block, from L2 after the first).
- ``ExpertsPolicy``: the routed experts at few rows (``runtime/kernels/experts.py``): one
  program per (pair, column block, pick, split); a pair is one (row, expert) pick.

Pure arithmetic on ints, so the policies are tested without running a kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.kernels.backend import cdiv, next_pow2


def split_depth(k: int, block_k: int, splits: int) -> int:
    """K per split for about ``splits`` splits: a multiple of ``block_k``, so every split
    but the last is whole chunks (the split count is then ``cdiv(k, depth)``)."""
    chunks = cdiv(k, block_k)
    return cdiv(chunks, max(1, min(splits, chunks))) * block_k


@dataclass(frozen=True)
class SkinnyTiling:
    """One call's tiles: ``split_k`` is K per program (a multiple of ``block_k``)."""

    block_m: int
    block_n: int
    block_k: int
    split_k: int
    num_warps: int = 4

    @property
    def dot(self) -> bool:
        """Row blocks of 16 and more run on tl.dot; one row as multiply-adds."""
        return self.block_m > 1

    def splits(self, k: int) -> int:
        return cdiv(k, self.split_k)

    def tiles(self, groups: int, m: int, n: int) -> int:
        return groups * cdiv(m, self.block_m) * cdiv(n, self.block_n)

    def grid(self, groups: int, m: int, n: int, k: int) -> tuple[int, int]:
        return self.tiles(groups, m, n), self.splits(k)


@dataclass(frozen=True)
class SkinnyPolicy:
    """Chooses a :class:`SkinnyTiling` for ``groups`` x [m, k] x [k, n], and which calls the
    kernel takes at all. Measured on the H200 at ``mid``'s shapes (benchmarks/skinny.py,
    benchmarks/results/skinny_h200*.md), every call replayed from a CUDA graph:

    - one row: the kernel 4.0 us vs cuBLAS 5.9 us for [2048 -> 512], 4.6 vs 12.7 us for
      [2048 -> 1024], 5.8 vs 6.1 us for [2048 -> 2048]; but cuBLAS 4.7 us vs 5.5 us for
      [512 -> 8192], where its tiles already spread the weight, and 3.8 vs 4.2 us for
      [512 -> 2048] at 8 rows (``max_n``: plain calls up to 2048 outputs);
    - 64 rows: cuBLAS was faster on every plain shape (5.8-6.3 us vs 7.0-9.7 us), so plain
      calls above ``max_rows`` rows go to cuBLAS;
    - grouped (``wo_a``, 4 x [2048 -> 512]): 5.9-7.5 us vs 24-25 us for cuBLAS's four
      launches and the concatenation at every row count up to 64 (``max_grouped_rows``).

    ``max_weight_bytes``: weights above this go to cuBLAS too (its large-N GEMV kept up
    with the bandwidth: the ``mid`` head, [2048 -> 129280], 124 us for 530 MB);
    ``programs_one_row`` / ``programs``: programs to aim for with one row / a row block
    (one row: the most, every program one ``block_k`` chunk, was fastest; row blocks
    re-read the weight per block, and fewer splits were faster);
    ``max_splits``: most K splits (the tile's last program reads them all)."""

    max_rows: int = 16
    max_grouped_rows: int = 64
    max_n: int = 2048
    max_weight_bytes: int = 64 * 1024 * 1024
    programs_one_row: int = 1056
    programs: int = 264
    block_n: int = 32
    block_k: int = 128
    max_splits: int = 16
    num_warps: int = 4

    def takes(self, groups: int, m: int, n: int, weight_bytes: int) -> bool:
        most = self.max_grouped_rows if groups > 1 else self.max_rows
        return 1 <= m <= most and n <= self.max_n and weight_bytes <= self.max_weight_bytes

    def tiling(self, groups: int, m: int, n: int, k: int) -> SkinnyTiling:
        block_m = 1 if m == 1 else min(64, max(16, next_pow2(m)))
        block_n = min(self.block_n, max(16, next_pow2(n)))
        tiles = groups * cdiv(m, block_m) * cdiv(n, block_n)
        programs = self.programs_one_row if m == 1 else self.programs
        splits = min(self.max_splits, cdiv(programs, tiles))
        return SkinnyTiling(block_m, block_n, self.block_k, split_depth(k, self.block_k, splits), self.num_warps)


@dataclass(frozen=True)
class ExpertsTiling:
    """One launch of the experts kernel: ``split_k`` is K per program."""

    block_n: int
    block_k: int
    split_k: int
    num_warps: int = 4

    def splits(self, k: int) -> int:
        return cdiv(k, self.split_k)

    def grid(self, rows: int, picks: int, n: int, k: int) -> tuple[int, int]:
        """(output rows x column blocks, picks summed per row x K splits)."""
        return rows * cdiv(n, self.block_n), picks * self.splits(k)


@dataclass(frozen=True)
class ExpertsPolicy:
    """Chooses the tiling of the two expert launches (W1|W3 with the SwiGLU, then W2 with
    the sum over a row's picks).

    ``max_pairs``: (row, expert) pairs, the shared expert's included, above which the
    grouped GEMM path runs instead: every pair reads its expert's weights itself, so when
    rows share experts the grouped GEMM, which reads each expert once, wins. Measured on
    the H200 at ``mid`` (6 of 32 experts + the shared one per row): alone
    (benchmarks/results/skinny_h200.md) the kernel took 37 / 51 / 101 / 183 us at
    1 / 2 / 4 / 8 rows against the eager reference's 143 / 161 / 195 / 230 us (and 1,239
    against 269 us at 64 rows); but inside the compiled decode step the reference is
    faster than alone, and with the kernel up to 9 rows the batch-8 step took 7.45 ms
    against 6.18 ms with it up to 2 rows (decode_h200_skinny64.md, decode_h200_skinny16.md).
    So up to 16 pairs (2 rows of ``mid``) go to the kernel;
    ``programs``: programs to aim for per launch; ``programs_one_row``: for a launch of at
    most ``one_row_pairs`` pairs (one decode row and its 6 + 1 experts). At one row of
    ``mid``, 1,056 programs took 34.0 us (2.59 TB/s, 60 % of the roofline) against 37.2 us
    with 528; at two rows 528 stayed faster, 51.8 against 58.3 us
    (benchmarks/results/skinny_h200_experts_sweep.md)."""

    max_pairs: int = 16
    programs: int = 528
    programs_one_row: int = 1056
    one_row_pairs: int = 8
    block_n: int = 32
    block_k: int = 128
    max_splits: int = 16
    num_warps: int = 4

    def takes(self, pairs: int) -> bool:
        return 1 <= pairs <= self.max_pairs

    def tiling(self, rows: int, picks: int, n: int, k: int) -> ExpertsTiling:
        block_n = min(self.block_n, max(16, next_pow2(n)))
        programs = rows * cdiv(n, block_n) * picks
        target = self.programs_one_row if rows * picks <= self.one_row_pairs else self.programs
        splits = min(self.max_splits, cdiv(target, programs))
        return ExpertsTiling(block_n, self.block_k, split_depth(k, self.block_k, splits), self.num_warps)
