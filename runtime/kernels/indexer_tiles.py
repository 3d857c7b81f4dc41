"""How the fused indexer logits (``runtime/kernels/indexer.py``) tile a call: queries per
program, keys per tile, key tiles per program (the kernel's docstring says why a program
loops over several), warps. Pure arithmetic on ints, so the policy is tested without
running a kernel."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.kernels.backend import cdiv, next_pow2


@dataclass(frozen=True)
class IndexerTiling:
    """One call's tiles: ``block_t`` queries x ``block_n`` keys per tile, ``key_tiles``
    tiles per program, ``num_warps`` warps; ``read_all``: every key tile up to N is read
    (none skipped by the counts, so no load waits for them)."""

    block_t: int
    block_n: int
    key_tiles: int
    num_warps: int
    keys_as_rows: bool = False
    read_all: bool = False

    def grid(self, t: int, n: int) -> tuple[int, int]:
        return cdiv(t, self.block_t), cdiv(n, self.block_n * self.key_tiles)


@dataclass(frozen=True)
class IndexerPolicy:
    """Chooses an :class:`IndexerTiling` from (T, nI, N).

    ``shared_query_rows``: up to 16 queries, one program's product holds this many (query x
    head) columns, so that many queries share each key tile read from memory (with one
    query per program, 8 queries read the keys 8 times: 16 % of the roofline at ``mid``,
    T=8, 128k keys); more queries: 64. ``key_tiles`` 0: as many tiles per program as keep
    about ``programs`` programs (at most ``max_key_tiles``), one program per tile when there
    are fewer tiles than that. ``keys_as_rows``: the kernel's product with the keys as the
    MMA's rows (runtime/kernels/indexer.py). ``num_warps`` 0: by size. With the keys as rows
    4 (one warpgroup for 64 key rows), but ``one_tile_warps`` where a program reads a single
    key tile against a query tile of at least ``one_tile_columns`` (query, head) columns;
    with the queries as rows 8 for a 128-row dot and 4 below.

    Why more warps for one key tile and a wide query tile: such a program loads more query
    bytes than key bytes (8 ``mid`` queries: a [128, 128] bf16 query tile, 32 KB, against
    16 KB of keys) and then does one product, so the call is its loads' latency, and 8 warps
    put twice the loads in flight per program; with several key tiles the query tile is
    loaded once and the loop pipelines the keys, where 8 warps lost. Measured on an H100
    (session 34, tile_sweep.py's "w8" against the default's 4 warps, graph replay, us;
    benchmarks/results/tile_sweep_h100_session34_indexer.md): 8 queries at 8k keys ``mid``
    3.38 -> 2.97, ``flash`` (4 queries per program: 128 columns) 3.92 -> 3.83; where a
    program loops over several tiles it lost (128k keys, 8 queries: ``mid`` 12.62 -> 13.07,
    ``flash`` 19.51 -> 19.88) and with a narrow query tile too (1 query, 8k keys: ``mid``
    2.23 -> 2.31, ``flash`` 2.31 -> 2.40). Confirmed by two sweeps of the rule's neighbours
    (tile_sweep_h100_session34_indexer_warps_1.md, tile_sweep_h100_session34_indexer_warps_2.md;
    "w4" is the rule before, us): where the rule takes 8 warps, ``mid`` 8 queries at 8k keys
    3.42 / 3.43 -> 2.97 / 2.98, at 16k keys 4.25 / 4.26 -> 3.89 / 3.89, 16 queries at 8k 4.60 /
    4.50 -> 4.45 / 4.46, ``flash`` 8 queries at 8k 3.88 / 3.87 -> 3.83 / 3.82. With two key
    tiles per program 8 warps split: faster at ``mid`` 8 queries on 32k keys (5.79 / 5.81 ->
    5.34 / 5.30) and ``flash`` 8 on 16k (5.34 / 5.32 -> 5.13 / 5.05), slower at ``flash`` 16
    queries on 8k (5.32 / 5.30 -> 5.52 / 5.46), so the rule stops at one tile. The kernel
    table's ``mid`` 8 queries at 8k keys: 3.40 -> 2.96 us (kernels_h100_session33_final.md ->
    kernels_h100_session34_indexer.md).

    ``read_all_up_to``: calls of at most this many queries read every key tile up to N and
    mask the scores by the counts afterwards, instead of skipping the tiles past every
    query's count (``read_all``; 0: every call skips them). Skipping
    makes every key load wait for the counts' load (a branch and a loop bound on them), a
    second memory round trip before the first key arrives; a decode call skips nothing
    (its queries see nearly every entry: the engine's keys are the entries written so far),
    while a prefill block's early queries see a fraction of them. The kernel's docstring
    has the chain. Measured (H200, tile_sweep.py's "read all", three runs,
    tile_sweep_h200_indexer_read_all_{1,2,3}.md): reading all was faster at every measured
    shape in every run, 1, 2 and 8 queries at 8k, 64k and 128k keys, ``mid`` and ``flash``,
    hot and cold (``mid`` 128k keys, 1 query: 6.44 -> 6.24 us hot, 11.01 -> 10.74 us cold;
    8 queries 12.96 -> 12.10 us). Prefill blocks (more than 8 queries) are untimed: they
    keep skipping.

    The defaults are the H200's best of three sweeps (benchmarks/tile_sweep.py, graph replay;
    tile_sweep_h200_indexer_key_tiles.md, tile_sweep_h200_indexer_key_tiles_2.md,
    tile_sweep_h200_indexer_keys_as_rows.md): at 128k keys
    and 8 ``mid`` queries 1 tile per program 27.8 us (32 %), 8 tiles 15.7 us (56 %), and the
    keys as rows 13.3 / 12.7 us (66 / 69 %, 8 / 4 warps); ``flash`` at 2 queries 18.4 ->
    11.7 -> 8.1 us. At 8k keys one tile per program stays best (2.5-5.0 us)."""

    shared_query_rows: int = 128
    block_n: int = 64
    key_tiles: int = 0
    programs: int = 256
    max_key_tiles: int = 16
    num_warps: int = 0
    keys_as_rows: bool = True
    read_all_up_to: int = 8
    one_tile_warps: int = 8
    one_tile_columns: int = 128

    def __post_init__(self) -> None:
        if self.block_n < 16 or self.block_n & (self.block_n - 1):
            raise ValueError(f"IndexerPolicy.block_n: expected a power of two >= 16 (tl.dot's smallest), "
                             f"got {self.block_n}")
        if self.num_warps not in (0, 1, 2, 4, 8, 16):
            raise ValueError(f"IndexerPolicy.num_warps: expected 0 (by size) or a power of two of 1-16, "
                             f"got {self.num_warps}")
        if self.one_tile_warps not in (1, 2, 4, 8, 16):
            raise ValueError(f"IndexerPolicy.one_tile_warps: expected a power of two of 1-16, got {self.one_tile_warps}")
        for name in ("shared_query_rows", "programs", "max_key_tiles", "one_tile_columns"):
            if getattr(self, name) < 1:
                raise ValueError(f"IndexerPolicy.{name}: expected >= 1, got {getattr(self, name)}")
        if self.read_all_up_to < 0:
            raise ValueError(f"IndexerPolicy.read_all_up_to: expected >= 0 (0 = never), got {self.read_all_up_to}")
        if self.key_tiles < 0:
            raise ValueError(f"IndexerPolicy.key_tiles: expected >= 0 (0 = by size), got {self.key_tiles}")

    def tiling(self, t: int, n_heads: int, n: int) -> IndexerTiling:
        if t <= 16:
            block_t = max(1, min(next_pow2(t), self.shared_query_rows // n_heads))
        else:
            block_t = max(1, 64 // n_heads)
        tiles = cdiv(t, block_t) * cdiv(n, self.block_n)
        key_tiles = self.key_tiles or max(1, min(self.max_key_tiles, tiles // self.programs))
        columns = block_t * n_heads
        if self.num_warps:
            warps = self.num_warps
        elif self.keys_as_rows:
            warps = self.one_tile_warps if key_tiles == 1 and columns >= self.one_tile_columns else 4
        else:
            warps = 4 if columns < 128 else 8
        return IndexerTiling(block_t, self.block_n, key_tiles, warps, self.keys_as_rows, t <= self.read_all_up_to)
