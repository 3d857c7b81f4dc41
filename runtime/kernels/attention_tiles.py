"""The fused attention's tile choice: one explicit row per (query-count bucket, head dim).

Why a table and not a formula: the best tiling of a memory-bound decode kernel depends on
how many programs fill the GPU, how many registers a [heads x head_dim] accumulator takes
and how deep the load pipeline can be, and the only reliable way to know is to time the
candidates on the GPU. ``benchmarks/attention_tiles.py`` sweeps candidates at the ``mid``
and ``flash`` decode shapes and prints the winners in this table's form; a row edited
here is the whole change. Each row below is a sweep's winner, timed again against the row
before it; the comments above the tables name the result files.

Each row gives, for queries in the bucket:
- ``block_h``: at most this many heads per program (MQA: a key tile is read once for all
  of them); at least 16 (``tl.dot``'s smallest M) and at most the head count rounded up;
- ``block_n``: keys per loop iteration;
- ``num_warps``, ``num_stages``: Triton's launch options (4 and 3 are its defaults);
- ``splits``: flash-decoding splits of the key list on CUDA (one merge kernel adds them
  up when > 1). Off CUDA (the interpreter) the key list is never split unless a caller
  forces it: splitting only adds work there;
- ``programs``: 0 launches ``splits`` as given; more makes ``splits`` a cap: the fewest
  splits (a power of two) that bring (query, head block) programs x splits to
  ``programs``. The best split count is the one that fills the GPU, not a constant of the
  query bucket: on the H200 the sweeps' winners were 256 programs (the partial kernel
  holds 255 registers, two programs per SM, 132 SMs) at every measured case, e.g. 8
  queries ``mid`` (16 heads, one head block) 16 splits, ``flash`` (64 heads, four blocks
  of 16) 8; 64 queries ``mid`` 4, ``flash`` (two blocks of 32) 2; packed caches with 128
  slots ``mid`` 2, ``flash`` 1 (benchmarks/results/attention_tiles_h200_splits_t8.md,
  attention_tiles_h200_splits_t64.md, attention_tiles_h200_packed_prefill.md). Fewer
  splits also write fewer [splits, head_dim] float32 partials, which at ``flash`` with 8
  queries and 16 splits asked (14 launched) are 14.7 MB for 6.9 MB of keys;
- ``merge_d``: head-dim columns per merge program (0: all of them, one program per query
  and head). The merge was 17-40 % of attention's device time at 8-64 queries with one
  program per (query, head): 128 programs at ``mid`` with 8 queries, each loading
  [splits, 512] float32 partials at once (benchmarks/results/ncu_h200_attention_gate_mhc.md:
  6 % occupancy); a narrower merge runs more, smaller programs;
- ``value_d``: value columns per partial program (0: all). A program's [heads, 512] float32
  accumulator is 128 registers per thread at 32 heads and 4 warps; ncu measured the partial
  kernel at 208-255 registers and 12 % occupancy, spilling at ``flash``. With a value split
  the programs of a split all compute the same scores (each reads the whole key rows) and
  keep HD / value_d times smaller accumulators, as FlashMLA splits the value dim across
  warpgroups. Packed caches ignore it (a second decode of every value column). Static
  sm_90 resources (triton 3.9, bf16, split; benchmarks/results/sass_static_sm90.md for
  the table's rows): the 64-query tile (32 heads, 32 keys) holds 255
  registers and 152 bytes of stack at 512 columns, 8 bytes at 256, none at 128; the
  8-query tile (32 heads, 16 keys) 242 registers at 512, 174 at 128. The query and key
  tiles stay in registers as tensor-core operands (mma.sync: 16-32 heads are too few rows
  for wgmma), so the accumulator is only part of the pressure. Timed: slower at every
  decode case but one (benchmarks/results/attention_tiles_h200_merge_t1.md,
  attention_tiles_h200_merge_t8.md), so off.
- ``prefetch_ids``: before its loop, each program prefetches into L1 every line of top-k
  ids its split reads (CUDA only). Why: a tile's key rows are addressed by its ids, so the
  software pipeline (compiled for sm_90 with Triton 3.6, flash prefill 64 heads, 2 stages)
  loads tile j + 1's ids synchronously at the end of iteration j, and only then issues
  that tile's key copy, which iteration j + 1 waits on at its start: two trips to memory
  per tile on the loop's critical path. With the ids in L1 one of them is an L1 hit.
  Measured on an H100 (session 28, benchmarks/results/attention_tiles_h100_prefetch_*.md, two
  sweeps, engine layout): prefill (512 queries) ``flash`` 304.5 -> 296.0 and 305.0 -> 294.3
  us, ``mid`` 128.5 -> 122.5 us in both, so the two prefill rows prefetch; 64 queries ``flash``
  50.6 -> 50.9 and 50.7 -> 50.9, ``mid`` 22.2 -> 23.2 and 22.1 -> 23.4, 8 queries engine
  ``mid`` 10.3 -> 10.8 and 10.5 -> 10.9 (ring equal): the decode rows do not.
- ``ids_ahead``: each iteration loads the next tile's ids, and its own keys are addressed by
  the ids the iteration before loaded (a loop-carried value, not a load of the same
  iteration). Why: with the ids loaded in the iteration that uses them, Triton 3.6 waits for
  every outstanding copy at the top of the loop (``async_wait`` 0 at 2 and 3 stages, sm_90),
  so the key copy never has more than the rest of one iteration to land; carried ahead, the
  3-stage loop issues the key copies two tiles ahead and waits for all but the newest
  (``async_wait`` 1). It costs registers: flash's 64-head prefill tile holds 255 and spills
  536 bytes at 3 stages (288 at 2; none without it). Measured on the H200 (session 29,
  benchmarks/results/attention_tiles_h200_ids_ahead_mid_1.md and
  attention_tiles_h200_ids_ahead_mid_2.md, two sweeps, with
  the ids prefetched; engine / ring, us): ``mid`` 512 queries, the prefill row (2 stages)
  123.4 / 218.5 and 123.6 / 217.4 -> 97.5 / 200.6 and 98.0 / 200.4 with ids ahead on 3
  stages (105.8 / 210.5 on 2); 64 queries, the row (3 stages, no prefetch) 23.8 / 39.6 in
  both -> 20.5 / 35.6 and 20.1 / 35.6 with ids ahead on 2 stages. So the 32-head rows carry
  the ids ahead (bit for bit the same output: the GPU test ran at the mid shapes). At
  ``flash``'s 64 heads it lost everywhere (attention_tiles_h200_ids_ahead_flash.md: 64
  queries 47.8 -> 76.3, 512 queries 295.7 -> 304.9 us), so WIDE_TILES do not.
- ``group_decode`` (packed caches): the scales are loaded and decoded once per group (32
  channels of the FP8 ring, 16 of the NVFP4 entries) and broadcast over its channels, e4m3
  bytes (the ring's codes, the entries' scales) go through the hardware's conversion, and
  each NVFP4 byte is loaded once and split into its two channels. Why: the bit decoding
  loads every scale byte once per channel (32 / 16 times the same byte), decodes each e4m3
  scale again per channel and each NVFP4 byte twice, for the ring and the entries over
  every key of a tile; on the H200 packed ring attention took 4-6x the bf16 ring's time at
  every tiling of a sweep (benchmarks/results/attention_tiles_h200_packed_t64.md, 64
  queries: ``mid`` 152.3 us best against 34.9, ``flash`` 399.7 against 66.3), and its table
  rows spill (328-784 bytes, sass_static_sm90_triton36_attention.md). Since session 30 the
  NVFP4 value is built from its bits (exponent and mantissa placed as a float32 denormal or
  normal, times 2^126) instead of a chain of compares and selects. The same values bit for
  bit (the interpreter test). Static sm_90 code (Triton 3.6,
  sass_static_sm90_triton36_attention.md, "loop bodies": one key-loop iteration) of the
  packed rows for 1 and 8 queries before session 31: 4,131 -> 1,438 and 4,820 -> 2,435
  instructions per 16-key tile. It needs ``decode_once`` (AttentionTile refuses it alone):
  on its own its bf16 output on the GPU was wrong (session 31, H100, Triton 3.6: in all 6
  bf16 cases of the GPU test, relative error 1.0-3.5 against the same row without it, and
  in all 6 sweep cases of both runs, 0.66-1.95 of the reference's largest value; float32, whose
  products are not on the tensor cores, bit for bit).
  What differs in the compiled kernel: alone, its TTGIR stores the decoded tile to shared
  memory twice and gives both products' operands ``kWidth = 8`` (the width Triton picks
  for a tile converted from 8-bit floats); through ``decode_once``'s identity, one store and
  ``kWidth = 2``. Which Triton step goes wrong was not isolated.
- ``split_sources``: each program walks its split's window slots in one loop and its top-k
  slots in a second, so a tile reads one source. Why: a tile of the single loop may hold
  both kinds of key, so every iteration addresses both sources, and on packed caches
  decodes every key both ways (the FP8 window and the NVFP4 entries, one of them masked
  off) and selects per key: twice the decoding the tile needs. The key list is W window
  slots then K top-k slots, and per-split lengths are whole tiles, so where W is a multiple
  of ``block_n`` (128 at ``mid`` and ``flash``) no tile is mixed and the output is the
  same bit for bit (the interpreter test). Cost: a second software-pipelined loop, whose
  prologue and epilogue a split with both kinds of slot runs twice. Static sm_90 code (Triton
  3.6, sass_static_sm90_triton36_attention.md; instructions of one loop iteration, and per
  key over mid's 128 window + 512 top-k slots): mid's 1-query row (16 heads, 32 keys) 715 ->
  416 (window) / 508 (top-k), 22.3 -> 15.3 per key; its 64-query row 1,045 -> 629 / 745,
  32.7 -> 22.6 per key (engine layout, the table's launches). On the packed 1-query row (16
  heads, 16 keys, 4 warps): bit-decoded 258 -> 200 per key, but with the grouped decode 90 ->
  120 (each loop's decode copied into both products' layouts, below), and with the grouped
  decode and ``decode_once`` 77 -> 53. Timed in session 31 on an H100 (each table row
  against its twin with split sources, twice: attention_tiles_h100_twins_1.md,
  attention_tiles_h100_twins_2.md, attention_tiles_h100_prefill_twins_1.md,
  attention_tiles_h100_prefill_twins_2.md; engine / ring, us): 64 queries ``mid`` 21.5 /
  26.8 -> 19.4 / 22.8 and 21.5 / 26.9 -> 19.3 / 23.1, ``flash`` 51.6 / 56.8 -> 48.6 /
  53.6 and 51.6 / 56.9 -> 48.6 / 53.8; 8 queries ``mid`` 11.0 / 11.5 -> 10.8 / 11.1 and
  10.8 / 11.4 -> 10.7 / 11.0, ``flash`` 19.1 / 19.2 -> 18.7 / 19.2 and 19.1 / 19.3 ->
  18.9 / 19.3; 512 queries ``mid`` 116.8 / 123.3 -> 100.6 / 112.6 and 115.1 / 121.8 ->
  99.1 / 110.7, ``flash`` 299.7 / 336.5 -> 271.5 / 307.2 and 300.1 / 332.9 -> 272.9 /
  303.6. At 1 query on the old 32-key row ``mid``'s engine layout lost (9.5 -> 9.8, 9.7),
  but the retiled row below won with it. So every hd-512 row splits its sources. It costs
  shared memory (two pipelined loops): flash's 64-head rows spill 48-64 bytes, and 64
  float32 heads at 3 stages would need 270,592 bytes (compiled metadata), more than sm_90
  has; the rows run 2 stages there.
- ``decode_once`` (packed caches, CUDA only): the decoded key tile passes an identity the
  compiler cannot copy (inline PTX), so it is decoded once and then converted for the two
  products. Why: the tile is an operand of both (scores: transposed; values: as is), and
  Triton 3.6's layout pass copies the cheap-looking decode chain, from the loaded bytes on,
  into each product's operand layout instead of converting its result once: the kernel's
  TTGIR held two fp8 conversions per loaded window tile, one of them in a layout replicated
  across warps. The same values (an identity); the interpreter runs without it (it cannot
  run PTX). Static sm_90 code (sass_static_sm90_triton36_attention.md), instructions per
  key over mid's 640 slots: the packed 1-query row (16 heads, 16 keys, 4 warps) 258 -> 241
  bit-decoded, with the grouped decode 90 -> 77 (stack 16 -> 0 bytes), and with split sources
  too 53 (window loop 628 and top-k loop 903 per 16 keys); the 8-query row (32 heads) 301
  bit-decoded, 152 grouped, 102 with all three; 16 heads x 32 keys on 8 warps with all three
  25.7, against 15.3 for mid's bf16 1-query row split. Timed in session 31 (H100, the
  twins above; packed ring, us, two runs): on the old packed rows alone 33.4 / 33.0 ->
  31.5 / 31.9 (``mid`` 1 query), 148.9 / 147.9 -> 136.9 / 133.4 (``mid`` 64), 414.4 /
  415.5 -> 364.2 / 364.1 (``flash`` 64); with the group decode and split sources on 16
  heads x 32 keys, PACKED_TILES below.
- ``float32_block_n``: keys per tile for float32 operands (0: ``block_n``). Why: a float32
  key tile takes twice a bf16 one's shared memory, and a tile that compiles but asks for
  more than sm_90's 232,448 bytes cannot launch. flash's 64-head rows on 64 keys take
  197,120 bytes in bf16 and would take 279,296 in float32 (Triton 3.6, compiled metadata),
  so they run float32 (the GPU tests' exact path) on 32 keys: 205,312.
  ``tests/runtime/compile_sm90.py --table-shared`` checks every row in both.
- ``merge_tail``: with more than one split, no merge launch: the last partial program of
  each (query, head block), found by a ticket, merges its splits in the same launch.
  Why: ncu put the merge at about 6 us beside 24-30 us of partial at 64 requests
  (benchmarks/results/ncu_h100_session31.md), a second launch whose reads (every split's
  accumulator) were just written, and the partials' last wave leaves SMs idle. The tail
  reads a head block's splits from one program (16 heads x 4 splits x 512 columns: 128 KB
  at 64 ``mid`` requests), so it pays where splits are few and queries many; at 1-8
  queries (16 splits, few programs) one program would read what 128 merge programs share.
  Not bit for bit the merge launch's output: it sums the splits in order where the merge
  kernel reduces them as a tree (float32 rounding). No row takes it: on an H100 it was
  slower at every row with a merge, in two runs (graph replay, us, each row -> its twin with
  the tail; benchmarks/results/attention_tiles_h100_session33_merge_tail_1.md,
  attention_tiles_h100_session33_merge_tail_2.md): at 1 and 8 queries about 10 us slower
  (``mid`` 1 query engine 7.9 -> 17.9, 8 queries 9.5 -> 24.2: one program reads what the
  merge's 128 share), at 64 queries 2-3 us (``mid`` engine 19.3 / 19.4 -> 21.8 / 21.9, ring
  23.6 / 23.2 -> 25.9 / 25.6, packed 29.3 / 29.1 -> 31.3 / 31.2; ``flash`` engine 44.7 /
  44.5 -> 47.3 / 47.2), ``flash`` packed 64 queries the same program (82.1 / 82.4: its row
  plans one split there, so there is no merge to move). At 64 packed queries over 2-16 splits it lost or
  tied as well (attention_tiles_h100_session33_merge_tail_splits.md, 2 stages: ``mid`` at 2 /
  4 / 8 / 16 splits 34.8 / 28.8 / 35.9 / 41.4 without the tail, 36.2 / 31.0 / 41.5 / 56.6
  with it; ``flash`` at 2 splits 95.0 / 95.2, its one-split row 80.7 on 3 stages). A third run
  (session 34, H100 again: attention_tiles_h100_session34_merge_tail.md) agrees: 8 queries
  ``mid`` engine 8.9 -> 24.3, ``flash`` engine 14.6 -> 20.1; 64 queries ``mid`` engine / ring /
  packed 19.4 / 22.8 / 28.9 -> 21.4 / 24.8 / 31.0, ``flash`` engine / ring 44.5 / 48.8 -> 47.1 /
  52.8, ``flash`` packed 83.0 both (one split). No H200 has timed it.
- ``merge_warps``: warps of each merge program (Triton's default 4 before session 34). Why a
  switch: a merge program loads its (query, head)'s [splits, merge columns] float32 partials
  at once and waits on them (ncu: long scoreboard on that load in every merge launch,
  benchmarks/results/ncu_h100_session31.md), 8 to 32 values per thread on 4 warps at the
  table's rows; more warps put more of them in flight per program, fewer leave room for
  more programs per SM. Static sm_90 code (Triton 3.6, one merge program; 1 / 2 / 4 / 8
  warps): ``mid``'s 8-query merge (16 splits, 256 columns) sums its splits across warps
  through shared memory on 4 and 8 warps (4 barriers) and within a warp on 1 and 2 (none;
  instructions per thread 500 / 409 / 348 / 266); the 64-query merge (4 splits, 512 columns)
  only on 8 (170 instructions per thread on 4, 204 on 8); the 1-query merge (16 splits, 64
  columns) from 2 warps on. Timed in session 35 (H100, graph replay, us, the row on 4 warps ->
  1 / 2 / 8: attention_tiles_h100_session35_merge_warps.md): the packed 1- and 8-query rows
  (PACKED_TILES, partials on 8 warps) gained on 8, ``mid`` 11.9 -> 11.5 / 11.7 / 10.8 and 12.2 ->
  12.0 / 12.2 / 11.2, ``flash`` 1 query 11.9 -> 11.6 / 11.7 / 10.7, while ``flash``'s 8-query packed
  row (PACKED_WIDE_TILES, 4 warps) lost on 8 (20.2 -> 21.1); on unpacked caches 1 warp was ahead at
  ``flash`` (1 query engine / ring 8.8 / 9.0 -> 8.2 / 8.5; 64 queries 45.0 / 48.6 -> 44.1 / 48.5) and
  behind at ``mid``'s 1 query (engine 7.7 -> 8.1), and 8 lost at every unpacked row (e.g. ``flash``
  64 queries engine 45.0 -> 53.1). A second run (attention_tiles_h100_session35_merge_warps_2.md,
  1- and 8-query rows) agreed: packed on 8 warps ``mid`` 11.9 -> 10.7 and 12.3 -> 11.1, ``flash`` 1
  query 12.1 -> 11.0; ``flash``'s unpacked 1-query row on 1 warp 9.0 / 9.2 -> 8.4 / 8.7. So the
  packed 1- and 8-query rows (PACKED_TILES) merge on 8 warps and ``flash``'s unpacked 1-query row
  (WIDE_TILES) on 1; the table's packed rows (kernels_h100_session35_compress_attention_packed.md):
  ``mid`` 1 / 8 requests 10.49 / 11.11 us (8.48x / 8.76x an empty launch, paired; 10.30x /
  10.38x in kernels_h100_session33_final.md), ``flash`` 1 request 10.92. The 64-query rows
  merge on 1 warp since session 36: two more runs of their twins
  (attention_tiles_h100_session36_merge_warps_t64_1.md, attention_tiles_h100_session36_merge_warps_t64_2.md;
  us, 4 warps -> 1) had 1 warp ahead or tied in every case, as in session 35's run: ``mid``
  engine 19.2 -> 19.2 and 19.0 -> 19.0 (19.6 -> 19.2 in session 35), ring 23.1 -> 22.7 and 23.0
  -> 22.8 (22.9 -> 22.4), packed 28.7 -> 28.4 in both (28.8 -> 28.5); ``flash`` engine 44.1 ->
  43.9 and 44.3 -> 43.7 (45.0 -> 44.1), ring 48.9 -> 48.7 and 49.3 -> 49.0 (48.6 -> 48.5). So
  TILES', PACKED_TILES' and WIDE_TILES' 64-query rows take ``merge_warps=1``; ``flash``'s packed
  64-query row (PACKED_WIDE_TILES) tied on every warp count (82.1-82.2 us) and stays.
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime.kernels.backend import next_pow2

T_BUCKETS = (1, 8, 64)  # upper bounds of the decode buckets; more queries: PREFILL
PREFILL = 0  # the bucket of more than T_BUCKETS[-1] queries
HD_BUCKETS = (128, 512)  # head dims up to 128, and larger


@dataclass(frozen=True)
class AttentionTile:
    block_h: int
    block_n: int
    num_warps: int = 4
    num_stages: int = 3
    splits: int = 1
    merge_d: int = 0
    value_d: int = 0
    programs: int = 0
    prefetch_ids: bool = False
    ids_ahead: bool = False
    group_decode: bool = False
    split_sources: bool = False
    decode_once: bool = False
    float32_block_n: int = 0
    merge_tail: bool = False
    merge_warps: int = 4

    def __post_init__(self) -> None:
        for name in ("block_h", "block_n", "num_warps", "merge_warps"):
            value = getattr(self, name)
            if value < 1 or value & (value - 1):
                raise ValueError(f"AttentionTile.{name}: expected a power of two, got {value}")
        if self.merge_warps > 16:
            raise ValueError(f"AttentionTile.merge_warps: expected at most 16 (Triton's most), got {self.merge_warps}")
        if self.block_h < 16 or self.block_n < 16:
            raise ValueError(f"AttentionTile: block_h and block_n must be >= 16 (tl.dot), got "
                             f"{self.block_h}, {self.block_n}")
        if self.float32_block_n and (self.float32_block_n < 16 or self.float32_block_n & (self.float32_block_n - 1)):
            raise ValueError(f"AttentionTile.float32_block_n: expected 0 (block_n) or a power of two >= 16, "
                             f"got {self.float32_block_n}")
        for name in ("merge_d", "value_d"):
            value = getattr(self, name)
            if value < 0 or value & (value - 1):
                raise ValueError(f"AttentionTile.{name}: expected 0 (the whole head dim) or a power of two, "
                                 f"got {value}")
        if self.programs < 0:
            raise ValueError(f"AttentionTile.programs: expected 0 (splits as given) or a program count, "
                             f"got {self.programs}")
        if self.num_stages < 1 or self.splits < 1:
            raise ValueError(f"AttentionTile: num_stages and splits must be >= 1, got "
                             f"{self.num_stages}, {self.splits}")
        if self.merge_tail and self.merge_d:
            raise ValueError("AttentionTile.merge_tail: the tail merges in the partial launch, so there are no "
                             f"merge programs to give columns (merge_d={self.merge_d}): expected merge_d=0")
        if self.group_decode and not self.decode_once:
            raise ValueError("AttentionTile.group_decode needs decode_once=True: without it the bf16 "
                             "output on the GPU is wrong (Triton 3.6; the module docstring says why)")

    def heads_per_program(self, n_heads: int) -> int:
        wanted = max(16, next_pow2(n_heads))
        return min(self.block_h, wanted)

    def splits_for(self, t: int, n_heads: int) -> int:
        """Splits asked for ``t`` queries of ``n_heads`` heads: ``splits``, or with
        ``programs`` the smallest power of two (at most ``splits``) whose programs reach
        that many."""
        if not self.programs:
            return self.splits
        base = max(1, t) * -(-n_heads // self.heads_per_program(n_heads))
        splits = 1
        while splits < self.splits and base * splits < self.programs:
            splits *= 2
        return min(splits, self.splits)

    def keys_per_tile(self, float32: bool) -> int:
        """Keys per loop iteration: ``float32_block_n`` for float32 operands where the row
        sets it (their key tiles take twice the shared memory of bf16's), else ``block_n``."""
        return self.float32_block_n if float32 and self.float32_block_n else self.block_n

    def merge_columns(self, head_dim: int) -> int:
        """Head-dim columns per merge program."""
        return head_dim if self.merge_d == 0 else min(self.merge_d, head_dim)

    def value_columns(self, head_dim: int, packed: bool = False) -> int:
        """Value columns each partial program accumulates: all of them for packed caches
        (splitting would decode every value column a second time)."""
        return head_dim if self.value_d == 0 or packed else min(self.value_d, head_dim)

    def label(self) -> str:
        merge = f" m{self.merge_d}" if self.merge_d else ""
        value = f" v{self.value_d}" if self.value_d else ""
        programs = f" p{self.programs}" if self.programs else ""
        prefetch = " pf" if self.prefetch_ids else ""
        ahead = " ia" if self.ids_ahead else ""
        group = " gd" if self.group_decode else ""
        sources = " ss" if self.split_sources else ""
        once = " do" if self.decode_once else ""
        narrow = f" f32n{self.float32_block_n}" if self.float32_block_n else ""
        tail = " mt" if self.merge_tail else ""
        merge_warps = f" mw{self.merge_warps}" if self.merge_warps != 4 else ""
        return (f"h{self.block_h} n{self.block_n} w{self.num_warps} s{self.num_stages} x{self.splits}{merge}{value}"
                f"{programs}{prefetch}{ahead}{group}{sources}{once}{narrow}{tail}{merge_warps}")


def t_bucket(t: int) -> int:
    """The table's query-count bucket of ``t`` queries."""
    for upper in T_BUCKETS:
        if t <= upper:
            return upper
    return PREFILL


def hd_bucket(head_dim: int) -> int:
    for upper in HD_BUCKETS:
        if head_dim <= upper:
            return upper
    return HD_BUCKETS[-1]


# The hd-512 decode rows are benchmarks/attention_tiles.py --quick's suggestion on the H200
# (best geometric mean over mid/flash x engine/ring;
# benchmarks/results/attention_tiles_h200.md); the hd-512 prefill row is the suggestion of a
# sweep at 512 queries (benchmarks/results/attention_tiles_h200_prefill.md: 32 keys per tile
# instead of 16, 1.5x at mid, 1.4x at flash). The decode rows' merge in head-dim column blocks
# (merge_d) is the suggestion of a sweep around these rows
# (benchmarks/results/attention_tiles_h200_merge_t1.md, attention_tiles_h200_merge_t8.md,
# attention_tiles_h200_merge_t64.md): T = 1 merge_d 64, mid engine 11.1 -> 9.8 us, flash engine
# 11.7 -> 10.4; T = 8 merge_d 256, mid engine 11.8 -> 10.7, flash engine 21.1 -> 21.0 (ring 23.7
# -> 23.9); T = 64 no column block was faster. Value columns per partial program (value_d) were
# slower everywhere but mid T = 1 engine (9.7 vs 9.8 us), so they stay off. The 8- and 64-query
# rows fill 256 programs (``programs``): in one interleaved sweep against the rows before
# (attention_tiles_h200_programs_t8.md, attention_tiles_h200_programs_t64.md) T = 8 (now 16
# heads x 32 keys, 8 warps) mid engine / ring 10.6 / 14.8 -> 10.3 / 14.2 us, flash 20.9 / 24.3
# -> 19.2 / 23.8; T = 64 mid the same splits (23.6 / 39.3), flash 71.0 / 90.7 -> 59.3 / 79.6.
# The prefill row (mid's since flash has WIDE_TILES) runs 2 stages, not 3: at mid, 512 queries,
# engine / ring 134.1 / 232.5 -> 130.0 / 217.9 us and 134.1 / 231.5 -> 129.6 / 215.1 in two runs on
# an H100 (benchmarks/results/attention_tiles_h100_mid_t512_1.md, attention_tiles_h100_mid_t512_2.md),
# 133.2 -> 128.8 us (engine) in one run on the H200 (session 26, console only). Since session 29
# the 64-query and prefill rows load each tile's ids a tile ahead, on 2 and 3 stages (the module
# docstring, ``ids_ahead``, has the timings). Since session 31 every hd-512 row splits its
# sources (the module docstring, ``split_sources``), and the 1- and 8-query rows are a sweep's
# suggestion with it (attention_tiles_h100_split_sources_sweep.md), each then run twice against
# the row before (H100; attention_tiles_h100_t1_1.md, attention_tiles_h100_t1_2.md,
# attention_tiles_h100_t8_1.md, attention_tiles_h100_t8_2.md; engine / ring, us): 1 query, 64
# keys per tile on 2 stages, ``mid`` 9.6 / 10.5 -> 8.2 / 9.1 and 9.5 / 10.2 -> 8.1 / 9.0,
# ``flash`` 10.6 / 10.8 -> 8.8 / 9.6 and 10.4 / 10.9 -> 8.7 / 9.6; 8 queries, 4 warps on 2
# stages, ``mid`` 10.5 / 11.1 -> 10.2 / 10.2 and 10.5 / 11.1 -> 10.2 / 10.0, ``flash`` 19.2 /
# 19.3 -> 15.9 / 15.9 and 19.3 / 19.5 -> 16.0 / 15.9 (without the merge's column blocks
# ``flash`` took 14.8-15.1 but ``mid`` 11.1-11.6). Since session 32 the 8-query row loads its ids a
# tile ahead: each decode row against its twin with it, twice (H100;
# attention_tiles_h100_ids_ahead_decode_1.md, attention_tiles_h100_ids_ahead_decode_2.md; engine /
# ring, us): 8 queries ``mid`` 10.1 / 10.0 -> 9.2 / 9.7 and 10.1 / 9.9 -> 9.3 / 9.6, ``flash`` 15.8
# / 15.8 -> 15.2 / 15.5 and 15.9 / 15.9 -> 15.2 / 15.6. So does the 1-query row, on the sweep's own
# measure (the geometric mean over both scales and layouts): its engine layout loses a little or
# ties, its ring layout gains more. Engine / ring, us, four runs (the two files above,
# attention_tiles_h100_session32_confirm_t1_1.md, attention_tiles_h100_session32_confirm_t1_2.md):
# ``mid`` 7.6 / 8.9 -> 8.0 / 8.3, 7.6 / 8.9 -> 8.0 / 8.2, 8.0 / 9.0 -> 8.1 / 8.4, 8.1 / 9.1 -> 7.8 /
# 8.5; ``flash`` 8.6 / 9.6 -> 8.7 / 9.0, 8.6 / 9.6 -> 8.7 / 8.9, 8.7 / 9.7 -> 8.8 / 9.1, 8.7 / 9.6
# -> 8.8 / 9.1 (a sweep around the row, attention_tiles_h100_session32_sweep_s1.md, found no tiling
# better in both layouts).
TILES: dict[tuple[int, int], AttentionTile] = {
    (1, 512): AttentionTile(16, 64, num_warps=8, num_stages=2, splits=16, merge_d=64, ids_ahead=True,
                            split_sources=True),
    (8, 512): AttentionTile(16, 32, num_warps=4, num_stages=2, splits=16, merge_d=256, programs=256,
                            ids_ahead=True, split_sources=True),
    (64, 512): AttentionTile(32, 32, num_warps=4, num_stages=2, splits=4, programs=256, prefetch_ids=True,
                             ids_ahead=True, split_sources=True, merge_warps=1),
    (PREFILL, 512): AttentionTile(32, 32, num_warps=4, num_stages=3, splits=1, prefetch_ids=True, ids_ahead=True,
                                  split_sources=True),
    (1, 128): AttentionTile(32, 32, splits=16),
    (8, 128): AttentionTile(32, 32, splits=16),
    (64, 128): AttentionTile(32, 32, splits=4),
    (PREFILL, 128): AttentionTile(32, 32),
}


# Packed caches (the static slab's FP8 ring and NVFP4 entries, decoded in the kernel) have rows
# of their own: decoding a whole [keys, 512] tile in registers spills, 1,016 bytes of stack with
# the 64-query row above at flash heads (benchmarks/results/sass_static_sm90.md), and 16 keys
# per tile measured best for them at every decode bucket in the same sweep
# (benchmarks/results/attention_tiles_h200_packed.md, ring_packed cases): T = 1 mid 50.2 -> 35.6
# us, flash 50.2 -> 36.2; T = 8 the table's row was already the best; T = 64 mid 311.0 -> 152.9
# us, flash 3,314.6 -> 417.7. The merge's column blocks help them as they help the loaded caches
# (attention_tiles_h200_packed_merge_t1.md, attention_tiles_h200_packed_merge_t8.md,
# attention_tiles_h200_packed_merge_t64.md): T = 1 merge_d 64, mid 36.1 -> 34.1 us (flash 37.7
# -> 36.2; 256 gave 36.1); T = 8 merge_d 256, mid 36.8 -> 35.4, flash 74.3 -> 72.8; T = 64 none.
# More than 64 queries (slots): attention_tiles_h200_packed_prefill.md (128 and 512, 24 tiles):
# 2 splits, mid 128 slots 384.5 -> 289.8 us, 1-3 % slower in the other three cases; filling 256
# programs instead (attention_tiles_h200_packed_programs.md) gives each case its best: 128 slots
# mid 292.1 us (2 splits), flash 757.0 (1); 512 slots 1,119.7 / 3,008.2 (1); 64 slots flash
# 394.5 (2; 4 splits 407.8). Since session 31 every packed row decodes per scale group, splits
# its sources and decodes once, on 16 heads x 32 keys filling 256 programs: the suggestion of a
# sweep with the three switches on (H100, twice: attention_tiles_h100_packed_switches_1.md,
# attention_tiles_h100_packed_switches_2.md; us, the row before -> the new row): ``mid`` 1 query
# 32.2 -> 13.5 / 13.8, 8 queries 33.8 -> 14.3 / 14.8, 64 queries 148.4 -> 30.2 / 30.8; ``flash``
# 32.9 -> 13.4 / 13.5, 77.0 -> 22.2 / 22.6, 404.7 -> 86.5 / 85.9 (the second run's table
# column is already the new row). At 128 and 512 slots (attention_tiles_h100_packed_prefill.md,
# one run): ``mid`` 281.2 -> 54.5 and 1,052.3 -> 171.6, ``flash`` 802.4 -> 169.2 and 3,122.5 ->
# 663.9. Packed ring attention was 4-6x the bf16 ring's time; it is now within 1.1-1.6x of it
# at 1-64 queries (kernels_h100_session31_attention.md). Since session 32 every packed row loads its
# ids a tile ahead (H100, each row against its twin with it; us): 1 query ``mid`` 13.7 -> 13.5 and
# 13.6 -> 13.4, ``flash`` 13.5 -> 13.1 and 13.6 -> 13.3; 8 queries ``mid`` 14.6 -> 13.8 and 14.5 ->
# 13.8, ``flash`` 21.7 -> 20.7 in both (attention_tiles_h100_ids_ahead_decode_1.md,
# attention_tiles_h100_ids_ahead_decode_2.md); 64 queries ``mid`` 30.4 -> 29.2, ``flash`` 84.5 ->
# 80.2 (attention_tiles_h100_ids_ahead_t64_t512.md, one run); 128 slots ``mid`` 54.1 -> 50.8,
# ``flash`` 174.2 -> 169.4 (one run), 512 slots ``mid`` 177.0 -> 166.2 and 176.3 -> 166.2, ``flash``
# 678.6 -> 637.5 and 674.0 -> 637.6 (the same file and
# attention_tiles_h100_ids_ahead_packed_prefill.md). With the ids ahead a sweep
# (attention_tiles_h100_session32_sweep_s3.md) retiled the 1- and 8-query rows, each then run twice
# more against the row before (attention_tiles_h100_session32_confirm_pk_1.md,
# attention_tiles_h100_session32_confirm_pk_2.md; us, three runs): 1 query on 64 keys per tile, 2
# stages, ``mid`` 13.3 -> 12.0, 13.4 -> 11.9, 13.8 -> 12.0, ``flash`` 13.4 -> 11.9, 13.2 -> 11.9,
# 13.9 -> 12.3; 8 queries on 2 stages, ``mid`` 14.2 -> 14.1, 14.0 -> 13.5, 14.1 -> 13.6, ``flash``
# 20.9 -> 19.9, 20.9 -> 19.9, 21.2 -> 20.2 (``mid``'s best, 64 keys on 8 warps at 12.1-12.3, took
# 25.0-25.3 at ``flash``). The 64-query row stays on 3 stages (``mid`` 29.3 -> 28.9 on 2, ``flash``
# 80.7 -> 84.7). Since session 33 those two rows are ``flash``'s alone (PACKED_WIDE_TILES below), and
# ``mid`` takes its own best: 8 queries on 64 keys and 8 warps (the 1-query row's tile), 64 queries on
# 2 stages. H100, each sweep's us for ``mid`` against the row before: 8 queries 12.1-12.3 against
# 13.5-13.6 (session 32's sweep and confirm runs above), 12.4 against 14.0
# (attention_tiles_h100_session33_part47_pk.md); 64 queries 28.9 against 29.3
# (attention_tiles_h100_session32_sweep_s3.md), 29.2 against 29.7 (the session-33 file). The 1- and
# 8-query rows merge on 8 warps since session 35, the 64-query row on 1 since session 36
# (``merge_warps`` above says why).
PACKED_TILES: dict[tuple[int, int], AttentionTile] = {
    (1, 512): AttentionTile(16, 64, num_warps=8, num_stages=2, splits=16, programs=256, ids_ahead=True,
                            group_decode=True, split_sources=True, decode_once=True, merge_warps=8),
    (8, 512): AttentionTile(16, 64, num_warps=8, num_stages=2, splits=16, programs=256, ids_ahead=True,
                            group_decode=True, split_sources=True, decode_once=True, merge_warps=8),
    (64, 512): AttentionTile(16, 32, num_warps=4, num_stages=2, splits=16, programs=256, ids_ahead=True,
                             group_decode=True, split_sources=True, decode_once=True, merge_warps=1),
    (PREFILL, 512): AttentionTile(16, 32, num_warps=4, num_stages=3, splits=16, programs=256, ids_ahead=True,
                                  group_decode=True, split_sources=True, decode_once=True),
}


# Packed caches at WIDE_HEADS heads or more (``flash``) keep the 8- and 64-query rows the shared
# table had before session 33: ``mid``'s new rows cost them 20.0 -> 25.1 us (8 queries on 64 keys,
# 8 warps) and 82.8 -> 86.1 (64 queries on 2 stages) in attention_tiles_h100_session33_part47_pk.md,
# as in session 32 (25.0-25.3 against 19.9-20.2; 84.7 against 80.7).
PACKED_WIDE_TILES: dict[tuple[int, int], AttentionTile] = {
    (8, 512): AttentionTile(16, 32, num_warps=4, num_stages=2, splits=16, programs=256, ids_ahead=True,
                            group_decode=True, split_sources=True, decode_once=True),
    (64, 512): AttentionTile(16, 32, num_warps=4, num_stages=3, splits=16, programs=256, ids_ahead=True,
                             group_decode=True, split_sources=True, decode_once=True),
}


# Calls of at least WIDE_HEADS heads (``flash``: 64) on unpacked caches have rows of their own. The
# 8-query row (since session 32) is the shared row without the merge's column blocks: at ``flash``
# it took 14.4 / 15.1 and 14.4 / 14.8 us against 15.5 / 15.9 and 15.6 / 15.9 with them (engine /
# ring, H100: attention_tiles_h100_session32_confirm_t8_1.md,
# attention_tiles_h100_session32_confirm_t8_2.md; 14.5 / 14.6 against 15.4 / 15.5 in
# attention_tiles_h100_session32_sweep_s2.md), while ``mid`` keeps them (9.0 / 9.8 against 10.5 /
# 11.1 in that sweep). The 64-query and prefill rows hold all 64 heads in one program on 8 warps, so
# each key tile is read once for all of them (32-head programs read it twice) and both products run
# on wgmma, whose smallest M is 64 (mma.sync below that). Compiled for sm_90 with the H200's Triton
# 3.6 (benchmarks/results/sass_static_sm90_triton36_attention.md, the "option flash" rows) the
# 32-key tile holds 246 registers and no stack where the 32-head prefill tile spills 136 bytes; it
# takes 131 KB of shared memory (compiled metadata), so one program per SM. On the H200, two sweeps
# each at ``flash`` (attention_tiles_h200_h64_t512.md, attention_tiles_h200_h64_t512_2.md,
# attention_tiles_h200_h64_t64.md, attention_tiles_h200_h64_t64_2.md; every tiling checked against
# the reference): 512 queries 370.7 / 369.7 -> 297.7 / 298.8 us (2 stages; 3 stages 322.8 / 323.9);
# 64 queries, engine / ring layout, 58.7 / 79.6 and 58.8 / 80.0 -> 50.9 / 67.9 (3 stages) and 48.5 /
# 66.0 us (2 stages), with 2 splits: 128 programs, one wave of one per SM (4 splits: 60.6-63.7 /
# 77.6-79.9). ``programs=128`` keeps that wave below 64 queries (untimed there). At 8 queries
# neither form won both layouts (engine 19.0 vs 19.4 us, ring 23.8 vs 22.4:
# attention_tiles_h200_h64_t8.md), so that bucket kept the shared row (the 64-head form lost again
# in session 32: 17.9 / 18.0 against 15.3 / 15.7 us, attention_tiles_h100_session32_sweep_s4.md); 16
# heads (``mid``) cannot fill wgmma's 64 rows. Since session 32 the 64-query and prefill rows take
# 64 keys per tile and prefetch their ids, with split sources (H100, two runs:
# attention_tiles_h100_wide_n64_1.md, attention_tiles_h100_wide_n64_2.md; us, the row before -> the
# new row): 64 queries engine 47.7 -> 44.4 (46.4 without the prefetch) and 47.9 -> 44.7 (46.6), ring
# 53.6 -> 49.2 (one run); 512 queries engine 275.0 -> 238.5 (252.9) and 274.4 -> 236.1 (250.3), ring
# 302.8 -> 273.0 (one run). In float32 they run on 32 keys (``float32_block_n``: 64 would not fit
# shared memory). On 16 warps (session 36; static sm_90 under Triton 3.6: 128 registers and 304 bytes
# of stack against 255 and 160 on 8) they took about twice as long (H100, engine layout: 512 queries
# 242.3 -> 473.7 us, attention_tiles_h100_session36_w16_t512.md; 64 queries engine / ring 43.7 / 48.8
# -> 74.4 / 75.6, attention_tiles_h100_session36_w16_t64.md); on 3 stages the 64-key tile asks
# 262,144 bytes of shared memory, over sm_90's 232,448.
#
# The 1-query row (since session 35) is the shared row with its merge on one warp
# (``merge_warps``): twice faster at ``flash`` and not at ``mid`` (H100, engine / ring, us:
# attention_tiles_h100_session35_merge_warps.md, attention_tiles_h100_session35_merge_warps_2.md):
# ``flash`` 8.8 / 9.0 -> 8.2 / 8.5 and 9.0 / 9.2 -> 8.4 / 8.7; ``mid`` 7.7 / 8.6 -> 8.1 / 8.6 and
# 7.8 / 8.4 -> 8.0 / 8.4. In the table (kernels_h100_session35_attention.md) ``flash``'s one query
# took 8.30 / 8.69 us, 7.22x / 7.23x an empty launch, paired (8.81 / 9.13 us, 7.62x / 7.87x in
# kernels_h100_session33_final.md).
WIDE_HEADS = 64
WIDE_TILES: dict[tuple[int, int], AttentionTile] = {
    (1, 512): AttentionTile(16, 64, num_warps=8, num_stages=2, splits=16, merge_d=64, ids_ahead=True,
                            split_sources=True, merge_warps=1),
    (8, 512): AttentionTile(16, 32, num_warps=4, num_stages=2, splits=16, programs=256, ids_ahead=True,
                            split_sources=True),
    (64, 512): AttentionTile(64, 64, num_warps=8, num_stages=2, splits=16, programs=128, prefetch_ids=True,
                             split_sources=True, float32_block_n=32, merge_warps=1),
    (PREFILL, 512): AttentionTile(64, 64, num_warps=8, num_stages=2, splits=1, prefetch_ids=True, split_sources=True,
                                  float32_block_n=32),
}


# every table by its name, in the order a sweep's suggestions list them
TABLES: dict[str, dict[tuple[int, int], AttentionTile]] = {
    "TILES": TILES, "WIDE_TILES": WIDE_TILES, "PACKED_TILES": PACKED_TILES, "PACKED_WIDE_TILES": PACKED_WIDE_TILES}


def table_name(t: int, head_dim: int, packed: bool = False, heads: int = 0) -> str:
    """The name (in TABLES) of the table whose row runs a call of ``t`` queries of ``heads``
    heads at ``head_dim``: for packed caches PACKED_WIDE_TILES at WIDE_HEADS heads or more,
    else PACKED_TILES; for unpacked ones WIDE_TILES at WIDE_HEADS heads or more, else TILES
    (each only where it has the bucket's row; TILES has every bucket's). One rule for the
    runtime (``tile_for``) and the sweep's suggestions (benchmarks/attention_tiles.py), so a
    row is suggested from the calls it runs."""
    key = (t_bucket(t), hd_bucket(head_dim))
    wide = heads >= WIDE_HEADS
    if packed:
        if wide and key in PACKED_WIDE_TILES:
            return "PACKED_WIDE_TILES"
        if key in PACKED_TILES:
            return "PACKED_TILES"
    elif wide and key in WIDE_TILES:
        return "WIDE_TILES"
    return "TILES"


def tile_for(t: int, head_dim: int, table: dict[tuple[int, int], AttentionTile] | None = None,
             packed: bool = False, heads: int = 0) -> AttentionTile:
    """The tile of a call of ``t`` queries of ``heads`` heads at ``head_dim``: ``table``'s row
    if one is given, else the row of the table ``table_name`` names."""
    key = (t_bucket(t), hd_bucket(head_dim))
    if table is not None:
        return table[key]
    return TABLES[table_name(t, head_dim, packed, heads)][key]
