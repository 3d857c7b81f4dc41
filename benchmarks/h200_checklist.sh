#!/usr/bin/env bash
# The H200 checks the next session can start from, batched into two device calls of under
# 10 minutes each (each step bounded by its own timeout; logs go to $OUT, the result files
# of /tmp/res come back as one tar, rewritten after each step so a call cut short still
# returns what finished). Usage on the device (several parts in one call: ... checklist.sh 20 23):
#   OUT=/path bash benchmarks/h200_checklist.sh 1   # GPU tests, mHC and attention sweeps
#   OUT=/path bash benchmarks/h200_checklist.sh 2   # packed attention: sweep, decode, ncu
#   OUT=/path bash benchmarks/h200_checklist.sh 3   # indexer key tiles, RoPE + quant tiles, gate at 4,096 rows, ncu of mHC
#   OUT=/path bash benchmarks/h200_checklist.sh 4   # the kernel table (benchmarks/kernels.py; since session 22 the >= 4 MiB cases also cold)
#   OUT=/path bash benchmarks/h200_checklist.sh 5   # mHC pinned mixing / host-split TF32x2: parity, precision, sweep; indexer keys as rows
#   OUT=/path bash benchmarks/h200_checklist.sh 6   # what session 14 left: GPU parity of its final defaults, mHC's tail from 256 / 512 rows
#   OUT=/path bash benchmarks/h200_checklist.sh 7   # session 15's open question: mHC's finish at 2-8 flash rows (ncu), the gate's selection (ncu)
#   OUT=/path bash benchmarks/h200_checklist.sh 8   # where the decode gate's and mHC finish's time goes: ncu's stall samples per source line
#   OUT=/path bash benchmarks/h200_checklist.sh 9   # mHC's reordered finish (parity, vs base/mhc.py), the serial chains: 1 vs 20 Sinkhorn iterations, gate top-1 vs top-6
#   OUT=/path bash benchmarks/h200_checklist.sh 10  # dc1885e's three finish steps apart (make bis/* first, see part 10), Sinkhorn 20 vs 1
#   OUT=/path bash benchmarks/h200_checklist.sh 11  # the committed mHC finish vs bis/*, then the kernel table
#   OUT=/path bash benchmarks/h200_checklist.sh 12  # the folded register Sinkhorn: GPU parity, decode finish vs bis/b0_b2eb990
#   OUT=/path bash benchmarks/h200_checklist.sh 13  # mHC at 64 / 512 rows: one-row finishing programs, decode's tiles (untimed variants)
#   OUT=/path bash benchmarks/h200_checklist.sh 14  # RoPE + quant in head / tail programs vs bis/rq_*; mHC's decode finish to 256 rows (64-4,096)
#   OUT=/path bash benchmarks/h200_checklist.sh 15  # inverse RoPE in one load / store, compress's weight first, vs bis/before_s18
#   OUT=/path bash benchmarks/h200_checklist.sh 16  # RoPE + quant tiles below 1,024 channels, compress on 1-2 warps
#   OUT=/path bash benchmarks/h200_checklist.sh 17  # RoPE + quant: narrow vectors whole, in head / tail programs, the default
#   OUT=/path bash benchmarks/h200_checklist.sh 18  # the gate: rows per program x pipelined stages, selecting warps (untimed)
#   OUT=/path bash benchmarks/h200_checklist.sh 19  # the mid 4,096-row gate's nearest tilings, three times; the kernel table
#   OUT=/path bash benchmarks/h200_checklist.sh 20  # the register-resident top-k (untimed): GPU exactness, topk.py twice, indexer + top-k
#   OUT=/path bash benchmarks/h200_checklist.sh 21  # compress rows first (untimed) three times; decode attention and compress: ncu per source line
#   OUT=/path bash benchmarks/h200_checklist.sh 22  # mHC's sweep mixing as fused multiply-adds (untimed): GPU parity, three runs against the default
#   OUT=/path bash benchmarks/h200_checklist.sh 23  # the indexer's decode calls reading every key tile (untimed): GPU parity, three sweeps; the cost of one dependent step
#   OUT=/path bash benchmarks/h200_checklist.sh 24  # programmatic dependent launch in the four two-launch ops (untimed): GPU bit identity, on / off interleaved
#   OUT=/path bash benchmarks/h200_checklist.sh 25  # session 23's new defaults (read_all, PDL for gate / mHC, fma mixing from 512 rows): PDL identity at 64 rows, the kernel table's gate, mHC, indexer rows
#   OUT=/path bash benchmarks/h200_checklist.sh 26  # mHC's PDL by rows (dependent_finish_to=64): default vs "pdl off" at 64-512 rows, twice
#   OUT=/path bash benchmarks/h200_checklist.sh 27  # the row-bound top-k (untimed): GPU exactness, topk.py twice against the chained split
#   OUT=/path bash benchmarks/h200_checklist.sh 28  # the row-bound top-k in indexer + top-k; where each top-k form's time goes (ncu per source line)
#   OUT=/path bash benchmarks/h200_checklist.sh 29  # 27 and 28's deciding runs in one call (row-bound GPU tests, indexer + top-k, topk.py once)
#   OUT=/path bash benchmarks/h200_checklist.sh 30  # flash attention with all 64 heads in one program (wgmma, untimed): sweeps at 512, 64 and 8 queries
#   OUT=/path bash benchmarks/h200_checklist.sh 31  # session 26's flips (64-head attention rows, the row-bound top-k): GPU parity, attention and indexer + top-k in the kernel table
#   OUT=/path bash benchmarks/h200_checklist.sh 32  # the row-bound select's smaller first candidate tile (untimed): GPU exactness, topk.py twice against one tile
#   OUT=/path bash benchmarks/h200_checklist.sh 33  # attention's top-k ids prefetched into L1 (untimed): GPU bit identity, the table rows with / without, twice
#   OUT=/path bash benchmarks/h200_checklist.sh 34  # the gate at flash with 64 rows: the whole sweep (never run at 64 rows), programs 1,024 / 2,048
#   OUT=/path bash benchmarks/h200_checklist.sh 35  # flash attention (64 heads) at 512 and 64 queries: ncu's stall samples per source line
#   OUT=/path bash benchmarks/h200_checklist.sh 36  # the flips in the kernel table's attention (engine, bf16 and packed rings) and indexer + top-k rows; part 40
#   OUT=/path bash benchmarks/h200_checklist.sh 37  # the gate's tilings at 16-64 rows at both scales (a block_e rule)
#   OUT=/path bash benchmarks/h200_checklist.sh 38  # part 36's ids-ahead attention sweeps at 2 / 3 stages
#   OUT=/path bash benchmarks/h200_checklist.sh 40  # flash's 64-head attention tile on 64-key tiles (part 36 runs it too)
#   (36-38's deciding sweeps in one call, for a session with little device time: ... checklist.sh 40 38 37)
#   OUT=/path bash benchmarks/h200_checklist.sh 41  # attention's group decode, split sources, decode once (untimed): GPU identity
#   OUT=/path bash benchmarks/h200_checklist.sh 43  # the three switches timed: table rows vs their twins, twice
#   OUT=/path bash benchmarks/h200_checklist.sh 44  # packed ring tilings with the group decode and decode once on, split sources 0 / 1
#   OUT=/path bash benchmarks/h200_checklist.sh 42  # decode attention under ncu per source line: flash 8 queries, mid 64 requests on bf16 / packed rings
#   OUT=/path bash benchmarks/h200_checklist.sh 45  # session 31's flips: GPU identity / parity at the new rows, 44 again, 42
#   OUT=/path bash benchmarks/h200_checklist.sh 46  # decode rows' twins with ids ahead / prefetched (twice), flash 64-key tiles with split sources
#   OUT=/path bash benchmarks/h200_checklist.sh 47  # session 32's flips: the attention GPU tests, the table's attention rows, the sweeps around the rows
#   OUT=/path bash benchmarks/h200_checklist.sh 48  # session 33: the merge tail (untimed) and mid's packed rows: GPU tests, twins twice, split counts, table rows
#   OUT=/path bash benchmarks/h200_checklist.sh 62  # session 42, under 5 minutes of device time: part 60's GPU parity, then part 61's sweep once (the tail and 512 rows first)
#   OUT=/path bash benchmarks/h200_checklist.sh 63  # session 43: the sweep tools' variants timed in turn, first GPU runs on sessions 41-42's closest calls, twice
#   OUT=/path bash benchmarks/h200_checklist.sh 64  # session 43: the gate's selecting launch with one row per program on 1 / 2 / 4 warps, twice
#   OUT=/path bash benchmarks/h200_checklist.sh 65  # session 43: flash's gate always selecting in a second launch, one row per program on 4 warps, vs the default at 1-4,096 rows, twice
#   OUT=/path bash benchmarks/h200_checklist.sh 66  # session 43's flip (flash's gate selects one row per program in a second launch): GPU parity, new vs "select 2 rows" twice, the table's gate rows
#   OUT=/path bash benchmarks/h200_checklist.sh 67  # session 43: flash's selection in groups first and on 8 warps vs the default, twice; ncu per source line of the selecting launch
#   OUT=/path bash benchmarks/h200_checklist.sh 68  # session 43: the mid gate's second launch at 1-64 rows, twice; mHC's whole decode sweep at 1-16 rows, interleaved, once
#   OUT=/path bash benchmarks/h200_checklist.sh 69  # session 43's second gate flip (every call selects in a second launch): GPU parity, new vs the rules before twice, the table's gate rows; mHC tf32x2 at 8-16 rows again
#   OUT=/path bash benchmarks/h200_checklist.sh 70  # session 43: mHC's "tf32x2" at the decode rows that take a dot (3-16): GPU parity, against the default twice
#   OUT=/path bash benchmarks/h200_checklist.sh 71  # session 43's mHC flip ("tf32x2" at 8-16 decode rows): the default's GPU parity, the table's mHC rows
#   OUT=/path bash benchmarks/h200_checklist.sh 72  # session 44: mHC's "bf16x3" projection (fn's three bf16 parts; untimed): GPU parity, precision against float64
#   OUT=/path bash benchmarks/h200_checklist.sh 73  # session 44: "bf16x3" against the default at 64-4,096 rows (and its 4-warp tilings) and at decode, in turn, twice
#   OUT=/path bash benchmarks/h200_checklist.sh 74  # session 44: ncu of "bf16x3" against the default at mid 512 / 4,096 rows; its decode rows again with 3-4 rows
#   OUT=/path bash benchmarks/h200_checklist.sh 75  # session 44: the mHC sweep's pipelining stages (1 / 2 / 3 / 4) with "tf32x3" and "bf16x3" at 64-4,096 rows, in turn, twice
#   OUT=/path bash benchmarks/h200_checklist.sh 76  # session 44's mHC flip ("bf16x3" at 8-16 decode rows): the default's GPU parity, against the rule before and bf16x3 from 3 rows twice, the table's mHC rows
#   OUT=/path bash benchmarks/h200_checklist.sh 77  # part 76 in under 4 minutes: the default's mHC GPU parity, against the rule before once
#   OUT=/path bash benchmarks/h200_checklist.sh 87  # attention's GPU parity, first half (the 48 merge-warps tests); 88: the other 74 (together over 400 s, more than one call holds with a start)
#   OUT=/path bash benchmarks/h200_checklist.sh 86  # session 49: mHC's projection in a launch of its own (MhcPolicy.apart_from, off): its GPU parity, then the "apart" variants against the default at 512 / 4,096 rows, twice
#   OUT=/path bash benchmarks/h200_checklist.sh 85  # session 48's flip (mHC decode split to 132 programs up to mid's 2048): the default's GPU parity (mid 144 rows now), against "decode p264" (the rule before) and 330 at 64-192 rows, twice
#   OUT=/path bash benchmarks/h200_checklist.sh 84  # session 47's flip (mHC decode split to 264 programs): the default's GPU parity, against 512 (the rule before) and 396 at 48-192 rows and against 132 / 198 / 330 at 64-192, twice
#   OUT=/path bash benchmarks/h200_checklist.sh 83  # session 46: mHC's decode split in one wave (decode_programs 396 / 264; untimed): GPU parity, against the default at 64-192 rows, twice
#   OUT=/path bash benchmarks/h200_checklist.sh 82  # session 46's flips (mHC decode sweeps at 2 stages, decode tiles to 192 rows): the default's GPU parity (now flash 192 rows), against the rule before and 3 stages at 3-192 rows, twice
#   OUT=/path bash benchmarks/h200_checklist.sh 81  # session 45: mHC's decode sweep in one wave at flash 17-48 rows (2 stages, 32-column tiles; untimed): GPU parity, against the default and "tf32x3 decode" at 8-48 rows, twice
#   OUT=/path bash benchmarks/h200_checklist.sh 80  # session 45's flips (mHC "bf16x3" from 3 decode rows, decode tiles to 48 rows): the default's GPU parity, against the tiles above decode and "tf32x3" on decode tiles at 17-48 rows, twice
#   OUT=/path bash benchmarks/h200_checklist.sh 79  # session 45: the second runs after "RUNS=1 ... 77 78" (the decode rows of 76, the 64-row sweep of 78), then the table's mHC rows
#   OUT=/path bash benchmarks/h200_checklist.sh 78  # session 45: mHC's "bf16x3" sweep on 64-row blocks with the coefficients loaded per tile (untimed): GPU parity, against the default at 512 / 4,096 rows, in turn, twice
#   OUT=/path bash benchmarks/h200_checklist.sh 61  # session 42: mHC "tf32x2" with fn split once per weight (was per call, inside the timed graphs): GPU parity, against the default twice
#   OUT=/path bash benchmarks/h200_checklist.sh 60  # session 41's flips (mHC fma mixing from 8 rows, flash gate on 32 experts from 8 rows): GPU parity, new vs old twice
#   OUT=/path bash benchmarks/h200_checklist.sh 59  # session 40: on an H200 with under 10 minutes: the H200-only rows (compress, RoPE + quant, inverse RoPE), then gate and mHC
#   OUT=/path bash benchmarks/h200_checklist.sh 58  # session 38: part 57's H100 winners (gate mid 8 rows in two launches, flash 8 rows on 32 experts; mHC fma mix at 8 rows) against the defaults, twice
#   OUT=/path bash benchmarks/h200_checklist.sh 57  # session 36: the gate's and mHC's decode sweeps on an H100 (their tilings are the H200's best)
#   OUT=/path bash benchmarks/h200_checklist.sh 56  # session 36's flips (the 64-query rows' merge on 1 warp): attention GPU tests; run as "56 4" (the whole table after)
#   OUT=/path bash benchmarks/h200_checklist.sh 55  # session 36: the 64-query rows' merge on 1 / 2 warps (twice), flash's 64-head attention on 16 warps (untimed), compress's new boundary
#   OUT=/path bash benchmarks/h200_checklist.sh 54  # after session 35: compress on 8 warps past 256 programs (512-4,096 rows), twice
#   OUT=/path bash benchmarks/h200_checklist.sh 53  # session 35: flash's 1-query row with its merge on one warp: GPU parity, the table's attention rows
#   OUT=/path bash benchmarks/h200_checklist.sh 52  # session 35: part 51's winners as defaults (packed decode rows' merge on 8 warps, compress on 8 warps up to 256 programs): twins, boundary rows, GPU parity, table rows
#   OUT=/path bash benchmarks/h200_checklist.sh 51  # session 34: compress's 512-channel tiles on 2-16 warps (parity, the sweep twice); attention's merge on 1 / 2 / 8 warps (parity, the decode rows' twins)
#   OUT=/path bash benchmarks/h200_checklist.sh 50  # session 34: the indexer's one-tile programs on 8 warps: GPU parity, the rule's neighbours twice, the table's indexer rows
#   OUT=/path bash benchmarks/h200_checklist.sh 49  # after session 33: compress's tiles with rows first (twice), the indexer's tilings, the merge tail's twins (4 in a second call: together they pass 10 minutes)
# Open after 2026-12-04 (session 20: part 18 ran (the gate: pipelined stages / 32-row
# programs moved nothing consistently; the selecting launch on one warp won at mid, so the
# default now selects in a second launch from 1,024 (row, expert) pairs on one warp per 256:
# gate_tiles_h200_select_repeats.md; from 256 padded experts each round reduces (key, score)
# pairs: gate_tiles_h200_paired.md) and part 4 five times (kernels_h200.md is the last, after
# the pairs; kernels_h200_session20_runs.md: >= 4 MiB 25 of 40 in every run, small ops 1-20 of
# 43 as the smallest empty reading moves 0.69-0.93 us), issue 16:
# - part 19 first: the gate at 4,096 mid rows is 50 % (8.0 us; one program per 32 rows over
#   all of D in 256-wide chunks measured 8.75 us before the change), three runs each;
#   flash's gate 4,096 rows 62 us is 33 % (compute-bound by the table's reading);
# - the serial chains left: mHC's 19 Sinkhorn iterations still take 1.2-1.4 us of a 3.7-us
#   finish; the gate's five more selection rounds 0.8-1.4 us (top-6 vs top-1); one bitonic
#   top-k instead of the rounds lost in 8 of 10 cases (gate_tiles_h200_sort_select.md); pairs
#   per round won at flash only; backend.jit's helpers could serve other kernels' reductions
#   (top-k's passes, mHC) the same way;
# - parts 20-22 (session 21, no device): the register-resident top-k (two launches and one),
#   compress's rows-first loads, mHC's FMA mixing and the reordered "tf32x2", written and
#   tested on the interpreter and compiled for sm_90 only; whichever wins becomes the default
#   (TopkSplitPolicy.resident / resident_one_launch, FusedPoolNorm.rows_first,
#   MhcPolicy.fma_mix) and part 4 reruns. 19-22 and part 4 do not all fit one session's 30
#   minutes (about 8-9 minutes each): 20 and 22 first (the largest expected gains), then 4,
#   then 21 and 19 (session 22 puts part 24 before them: see below);
# - part 23 (session 22, no device): IndexerPolicy(read_all_up_to=16), decode calls' key
#   loads no longer waiting for the counts (one memory round trip fewer before the first key
#   tile; same bits), and benchmarks/chain_floor.py (what one dependent load, reduction or scan
#   costs in a replayed kernel: how many the small-op goal leaves room for); about 4-5
#   minutes;
# - part 24 (session 22, no device): the second launches of attention (merge), the gate
#   (selection), mHC (finish) and the split top-k launched dependent on the first (Hopper's
#   PDL, runtime/kernels/pdl.py: the launch overlaps the first kernel; an empty launch is
#   0.88-1.0 us of the 2x-empty goal). Switches FusedSparseAttention(dependent_merge),
#   GatePolicy / TopkSplitPolicy(dependent_select), MhcPolicy(dependent_finish_to); flip each
#   whose decode cases get faster in benchmarks/dependent_launch.py, which also times the
#   one-launch (ticket) forms beside them: whether a dependent second launch beats the
#   gate's and the resident top-k's tickets. About 5-6 minutes. The next session's order:
#   24, then 20, then 23, then 22 or 4 (one call each; about 30 minutes with the start);
# Session 23 ran 24, 20 + 23, 22, 25 and two mHC sweeps at 256 / 512 rows: read_all, the gate's
# PDL, mHC's PDL up to 64 rows and its FMA mixing from 512 rows are defaults now; the resident
# top-k, attention's PDL and tf32x2 stay off (README, "Session 23"). Next session, in order:
# - part 24 again (now: at-exit triggers for attention and mHC, mHC at 128-512 rows, the GPU
#   identity at 64 rows): sets attention's merge_at_exit, MhcPolicy.finish_at_exit_from and
#   dependent_finish_to (128 rows untimed);
# - part 4 (the whole table, cold readings; not run since session 20), then 21 and 19;
# - still open: mHC below goal everywhere (decode 5.5-8.8 us; 19-36 % from 512 rows), the
#   decode gate (mid 4.0-4.8 us, flash 7.8-12.5 us), attention below 512 queries, flash
#   prefill attention (28 %), ops under 4 MiB (see above for how unstable that line is).
# Session 24 (no device lent) wrote the row-bound top-k (runtime/kernels/topk_rowbound.py: one
# bound for the whole row, 3 + at most 7 radix passes per row instead of 11 in each of the
# chained split's two launches) and parts 27-28 for it: GPU exactness and benchmarks/topk.py
# twice (--row-bound next to the chained split; about 7-8 minutes), then indexer + top-k with
# it and ncu's stall samples per source line of the three forms at flash 128k keys, one query
# (about 5 minutes). Next session: 24, then 27, 28, then 4 (one call each);
# TopkSplitPolicy.row_bound becomes the default if it beats the chained split in both topk.py
# runs and in the indexer + top-k rows.
# Session 25: no device machine started (tries about 10 minutes apart from 09:01 to 11:30 UTC,
# 90 s of device time each); part 29 holds 27 and 28's deciding runs for a session that starts late.
# Next session, in order: 27 (or 29), 28, 24, then 4 (now with the paired empty-launch column).
# Session 26: part 30 (64 heads per program at flash, wgmma) after 29, before 24.
# Session 26 ran 29, 30 (and its sweeps again, topk.py's second run), 24. The row-bound top-k beat
# the chained split at all 48 split shapes twice (chunks of 4,096 best but at 8 rows of 128k keys);
# it is the default (RowBound: 4,096-key chunks, at most 128 programs). 64 heads per program won
# flash at 64 queries and prefill (WIDE_TILES). PDL at exit never won; mHC's PDL from 128 rows lost
# at mid. Next session: 31 (the flips' GPU parity and table rows, mid prefill on 2 stages), then
# 4, then 28's ncu.
# Session 27 (on an H100: the H200 did not come) ran 31, 4 and 28's ncu. Under ncu the row-bound
# select's last launch (one program per row, 7 passes over a 4,096-key tile holding about 550
# listed keys at k = 512) took 18.9 of its 34 us; part 32 times a first tile sized to the list.
# After 21:40 UTC no machine started (tries about 10 minutes apart, 90-180 s of budget each).
# Next session: 32 (the first tile's GPU exactness and topk.py twice; flip first_list_per_k to 2 if
# it wins), then 4 on the H200 (this session's table ran on an H100), then the open goals.
# Session 28 (an H100 again) ran 32, 33, 34 + 35 and 4. The first tile and 4 group maxima per k
# won at all 24 top-k split shapes twice (RowBound defaults now); the prefill attention rows
# prefetch their top-k ids (3-5 %; decode rows lost or tied); at flash with 64 rows the gate's
# 64 experts per program (d128 e64) took 8.75 us against the default's 11.81 (one sweep); ncu:
# flash prefill attention moves 406 GB/s of DRAM (most gathered keys are L2 hits), a third of
# its stall samples at the score product's barrier. The table (kernels_h100_session28.md) reads
# each case against the card's own measured copy bandwidth too (2.99 TB/s on the H100).
# Next session: 36 (the flips in the table; 64-key tiles and ids one tile ahead for attention),
# 37 (the gate's tilings at 16-64 rows: a block_e rule if 64 experts per program wins at both
# scales), then 4 on an H200, then the open goals.
# Session 29 (an H200, 10 minutes of calls after four failed starts) ran 40, 38, 37, the decode-
# batch rows of the table (kernels_h200_session29_attention.md) and a quick packed sweep: mid's
# 32-head rows now carry the ids a tile ahead (prefill 123.5 -> 98 us, 64 queries 23.8 -> 20.3),
# flash's gate takes 32 / 64 experts per program above 16 / 32 rows (64 rows 12.6-13.2 -> 9.3-9.9
# us); packed ring attention is 4-6x the bf16 ring (152 vs 35 us at mid, 64 queries).
# Untimed since: the ring layout's window rows without an int64 modulo per key (part 36's ring rows
# against kernels_h200_session29_attention.md: 13.0 / 14.2 / 41.0 us at mid, 13.6 / 23.7 / 67.9 at flash).
# Next session: 41 (the grouped decode of packed caches; flip PACKED_TILES to its sweep's rows),
# then 36 (the table's attention rows with every flip, bf16 and packed rings), 42 (decode attention
# under ncu), 40 again (flash prefill on 64-key tiles: 296.6 -> 281.1 us in its one run), then 4.
# Session 31 (an H100, all 30 minutes) ran 41, 43, 44, 45, 36, 4 and sweeps by hand: the grouped
# decode alone is wrong in bf16 on the GPU (now refused without decode_once); with all three
# switches packed ring attention is 2.4-4.9x faster (mid 64 requests 148.4 -> 30.2 us); split
# sources is on in every hd-512 row, and the 1- / 8-query rows are retiled (kernels_h100_session31*,
# attention_tiles_h100_*). ncu (ncu_h100_session31.md): the top-k id load leads decode's stalls,
# and the 64-request merge takes ~6 us beside 24-30 us of partial.
# Next session: 4 on an H200 (the whole table after session 31's flips), then 46 (decode
# attention's id-load latency: ids a tile ahead / prefetched at 1-8 queries; flash prefill on
# 64-key tiles with split sources), then the merge at 64 requests (~6 us per launch).
# Session 32 (an H100, all 30 minutes) ran 4 and 46, sweeps around every decode row and the
# deciding runs: ids a tile ahead in every packed row and the 1- / 8-query bf16 rows; packed 1- and
# 8-query rows retiled (64 keys on 2 stages; 2 stages); flash's 8-query calls without the merge's
# column blocks (WIDE_TILES[(8, 512)]); flash's 64-head rows on 64 keys with the ids prefetched (32
# keys in float32: AttentionTile.float32_block_n). Flash prefill 275.2 -> 241.8 us
# (kernels_h100_session32_attention_final.md). Next session: 47 on an H200 (the flips' GPU tests
# and table rows there; none of the last seven sessions' tables ran on one), then 4, then the
# merge at 64 requests (untouched: ~6 us per launch under ncu) and packed attention at mid's 8
# requests (64 keys on 8 warps took 12.1-12.3 us against the row's 13.5-13.6, but 25 at flash:
# a packed row by heads, as WIDE_TILES are for loaded caches).
# Session 33 (an H100 again, every start): 47 (166 GPU tests passed; the table's attention rows and
# the sweeps agree with session 32's), then mid's own packed rows (8 requests on 64 keys / 8 warps,
# 64 on 2 stages; flash's in PACKED_WIDE_TILES: mid 8 requests 14.0 -> 12.0 us), 48 (the merge tail
# lost at every decode row with a merge: off), 21 for the first time (compress rows first won every case three
# times: now the default), and 4 twice (kernels_h100_session33.md, kernels_h100_session33_final.md:
# 34 of 92). Next session: 49 (4 at its end) on an H200 if one comes (none since session 29), then
# the decode merge at 64 requests another way (fewer partial bytes: the tail read them from one program).
# Session 34 (an H100 twice; six starts found no machine, 180-270 s of budget each): 49
# (compress's default stays best; the merge tail lost a third time; the indexer's sweep found 8 warps
# faster for one key tile against 8 queries), 50 (that rule held twice: mid 8 queries at 8k keys 3.40 ->
# 2.96 us in the table). Not run: 51 (merge_warps and compress on 8 / 16 warps, both untimed). Next
# session: 51 first (about 5 minutes), then 4 if anything flips.
# Session 35 (an H100 three times; seven starts found no machine, 90-180 s of budget each): 51
# (compress on 8 warps faster up to 512 rows in both sweeps; the packed 1- / 8-query rows' merge faster
# on 8 warps, flash's unpacked 1-query merge on 1), 52 (both held: the new defaults, 158 GPU tests
# passed, the table's compress and packed rows) and 53 (48 GPU tests; the table's attention rows).
# Not run: 4 (the whole table since these flips). Next session: 4 first (a call of its own), then
# 54 (compress's 8 warps up to 1,024 programs? 2,048 rows: 3.44 against 3.58 us, one run).
# Session 36 (an H100): 4 (37 of 92, kernels_h100_session36_table.md), 54 (8 warps ahead at 2,048
# rows in both sweeps, tied at 1,024, behind at 3,072: compress's boundary is now 1,024 programs), 55
# (the 64-query rows' merge on 1 warp ahead or tied in every case twice more: flipped; flash's 64-head
# tiles on 16 warps twice as slow). Not run (one call taken back mid-run, then no machine): 56 and 57.
# Next session: "56 4" (the attention GPU tests after the flip, then the whole table), then 57.
# Session 37: no device time (210 s left at its start, under the 4 minutes a machine's start
# needs), so nothing ran. Next session: "56 4", then 57, as above.
# Session 38 (an H100, after ten tries found no machine, 90-180 s of budget each): 56
# (164 attention GPU tests passed after the merge flip), the table's attention rows
# (kernels_h100_session38_attention.md) and 57 (gate_tiles_h100_session38_sweep_*.md,
# tile_sweep_h100_session38_mhc_decode.md), once: at 8 rows the gate's default lost at mid to two
# launches (4.41 vs 4.66 us) and at flash to 32 experts per program (d256 e32 w4 7.66 vs 8.35), mHC's
# default to fma mixing (mid 8.33 vs 8.64, flash 9.12 vs 9.38); at 1 row the defaults led or tied.
# Nothing flipped (a winner wins a second run first). Next session: 58, then 4 (the whole table).
# Session 39: no device time (85 s left: a retry of session 38's stop). Session 40: every start
# failed (H100 and H200 alike, 90-180 s of budget each, 1,800 s down to under 300), so nothing ran.
# Next session: 58 on an H100 (then 4 if anything flips); on an H200, 4 (the whole table, not run on
# one since session 29), or 59 when under 10 minutes of device time are left.
# Session 41 (an H100, after four failed starts): 58 twice (four runs; tile_sweep_h100_session41_*,
# gate_tiles_h100_session41_*). Flipped: MhcPolicy.fma_mix_from 512 -> 8 and
# GatePolicy.wide_experts_rows 17 -> 8 (flash's gate on 32 experts from 8 rows); the mid gate's
# two launches at 8 rows won four of four too but needs a rule by rows, not pairs: left. The
# GPU parity run with -k "mhc or gate" passed what it reached before its 280 s limit (about
# 180 tests); the last start failed. Next session: 60 (the flips' GPU parity, new vs old twice),
# then 4 (the whole table; on an H200 if one comes).
# Session 42 (an H100 after nine failed starts, 276 s left after its first call): 62 (the
# flips' GPU parity: 40 passed; tf32x2 with fn split once per weight against the default),
# then part 60's sweeps and 62's once more by hand (tile_sweep_h100_session42_*,
# gate_tiles_h100_session42_flash): both flips held (mHC fma mixing faster in 18 of 20, the
# gate's 32 experts at 8 and 16 rows); tf32x2 still lost from 64 rows, in its sweep kernel (mid
# 512 rows 13.5 -> 18.1 us): it stays off.
# Next session: 4 (the whole table, on an H200 if one comes), then 60 on an H200 (the flips are
# timed only on H100s).
# Session 43 (an H100 at every start, five starts, none failed): 4 (kernels_h100_session43.md,
# before the gate flip), 63 (the sweep tools' variants in turn: both flips held in every
# timing), 64-65 (the gate's selection, one row per program) and 66 (the flip: GPU parity by
# hand, 72 passed; new vs "select 2 rows" twice; the table's gate rows), 67 (the selection in
# groups first and on 8 warps: slower everywhere, not kept; ncu of the selecting launch), 68
# (mid's gate faster in a second launch; mHC's decode sweep in turn: "tf32x2" ahead at 8-16
# rows), 69 (the flip to a second launch for every gate call: parity 72 passed, faster at every
# mid row count in both runs), 70-71 ("tf32x2" from 8 decode rows: parity, two runs, the
# table's mHC rows). 210 s of device time left, given back.
# Session 44 (an H100 at both starts that came; eight starts failed, 90-210 s of budget each):
# 72-73 ("bf16x3": GPU parity 15 passed, as close to float64 as tf32x3; slower from 64 rows,
# faster at 8-16 decode rows), 74 (ncu of bf16x3 beside the default at mid 512 / 4,096 rows; its
# decode rows again, with 3-4: faster in 8 of 8) and 75 (pipelining stages: nothing over Triton's
# 3). The flip to "bf16x3" at 8-16 decode rows (two runs agree) is committed; 3-7 rows (one run)
# wait for 76 / 77, which found no machine.
# Session 45 (an H100 at both starts that came; six starts failed): "RUNS=1 ... 78 77" (the
# 64-row "bf16x3" sweeps, coefficients per tile or held: 1.5-2.2x slower, not kept; the
# default's GPU parity 12 passed, "bf16x3" at 3-4 rows faster again), then by hand on the warm
# machine: the table's mHC rows, 3-4 rows a third time (flip: "bf16x3" from 3 decode rows; its
# parity 48 passed), the whole table twice (36 of 92 both times), "bf16x3" at 24-48 rows and
# the decode tiles there (6 of 6 faster in both runs: flip, decode tiles to 48 rows). A second
# start (an H100): 80 (parity 20 passed; three runs: faster at mid 17-48 and flash 24-48, flash
# 17-20 rows 0.3-0.6 us slower, and "tf32x3" beat "bf16x3" on flash's decode tiles from 20 rows).
# Session 46 (an H100 at the one start that came, the sixth try: four failed, one refused): 81 (parity 8
# passed; 2 stages faster than 3 in all 24 cases of two runs at 8-48 rows, 32-column tiles
# slower at flash: flip, decode_stages 2), then by hand on the warm machine with the flip set in
# the device's copy: 1-4 rows (3-4 faster, 1-2 a tie), the table's mHC rows twice, 17-48 rows
# against the tiles above decode (flash 17-20 rows now faster too), the decode tiles at 64-256
# rows at 2 stages (faster from 64 to 192 but flash 96, slower from 208: flip, decode_rows 192;
# GPU parity with both flips: 28 passed, then every mHC GPU test: 100 passed), against the rule
# before three times (55 of 60 faster) and the whole table twice (36 and 35 of 92).
# Session 47 (an H100 at the third try: two starts failed, one refused): 82 with RUNS=1 (parity
# 40 passed, flash 192 rows the first time; session 46's flips faster again at every count but
# flash 96), 83 twice (the decode split at 264 or 396 programs: flash 96 rows 20.4 -> 14.6 us
# in both runs), then by hand with the flip set in the device's copy (decode_programs 264):
# GPU parity 40 passed, against 512 and 396 three times, the whole table twice (37 of 92 both
# times), 132 / 198 / 330 twice, and the mHC, e2e and static-step GPU tests: every one passed
# but test_graphs_equal_the_static_step_bit_for_bit_on_the_gpu, whose compiled helpers
# (decode_compile) failed to compile the gate's kernel (NameError: gdc_enter, a builtin
# Inductor neither copies nor imports; fixed since as a jitted helper, and checked statically:
# tests/runtime/compile_sm90.py --inductor). Part 84 is those runs as one part.
# Session 48 (an H100 at the tenth try: five starts failed, three were refused, one machine was
# taken back mid-call): 84 with RUNS=1: the static-step GPU test passed (the decode_compile
# fix's first GPU run), mHC parity 46 passed, 264 against 512 a fourth time (flash 80-192 rows
# 2.0-5.7 us faster, mid 144 rows 0.57 slower again) and 132 / 198 / 330 a third time (132
# faster at every mid count from 80 to 192 rows in all three runs: flip, narrow_decode_programs
# 132 up to a hidden size of 2048); then by hand: the e2e, static-decode, batched and tf32-split
# GPU tests (8 passed) and the gate, indexer, top-k and inverse RoPE GPU parity (140 passed);
# attention's GPU parity was cut by the budget (no result).
# Session 49 (an H100 at the first try): 85 with RUNS=2 (mHC GPU parity 59 passed, mid 144 rows
# and "p264" included; the default 0.23-0.35 us faster than "decode p264" at mid 144-176 rows in
# both runs, the rest within the timer's spread: the flip stays), attention's GPU parity (122
# tests: cut at 400 s after 109 passed, the last 19 passed in a call of their own), ncu of the
# mHC site at mid 64 / 512 and flash 4,096 rows (ncu_h100_session49_mhc.md); a call naming
# nvidia-h200 came as an H100 (nothing run).
# Then five starts failed and four calls were refused (765 s of budget), so part 86 did not
# run.
# Next session: 86 (the projection apart: parity and timings); on an H200 4 (the whole table),
# 60, 69, 70, 80, 82, 83, 84, 85, 87 and 88 (every flip since session 35 is timed only on H100s).
set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
T0=$(date +%s); R=/tmp/res; mkdir -p "$R"
el() { echo "[$1 rc=$2 at $(( $(date +%s) - T0 )) s]"; tar -cf "$OUT/res.tar" --exclude='*.ncu-rep' -C /tmp res; }  # reports: too large to come back
# ncu's stall samples per source line of profile_ops.py's cases (parts 21, 35, 42, 67):
# ncu_lines TAG SECONDS TOP CASE... profiles into $R/TAG.ncu-rep, keeps its details and its
# CUDA + SASS source CSV beside it, prints each launch's duration, stalls, registers,
# occupancy and DRAM throughput, and the TOP source lines (also $OUT/source_lines_TAG.txt)
ncu_lines() {
  local tag=$1 secs=$2 top=$3; shift 3
  timeout "$secs" ncu --clock-control none --profile-from-start off --set full --import-source yes -o "$R/$tag" python benchmarks/profile_ops.py "$@" > "$OUT/ncu_$tag.log" 2>&1; el "ncu $tag" $?
  ncu -i "$R/$tag.ncu-rep" --page details 2>/dev/null > "$R/${tag}_details.txt"; el "details $tag" $?
  ncu -i "$R/$tag.ncu-rep" --page source --print-source cuda,sass --csv > "$R/${tag}_cuda_sass.csv" 2> "$R/${tag}_cuda_sass.err"; el "source $tag" $?
  grep -E "_kernel \(|Duration|Warp Cycles Per Issued|Registers Per|Achieved Occupancy|DRAM Throughput" "$R/${tag}_details.txt" | head -60
  python benchmarks/ncu_source_lines.py "$R/${tag}_cuda_sass.csv" --top "$top" | tee "$OUT/source_lines_$tag.txt"
}
# RUNS times (default 2) tile_sweep.py's mHC variants LABEL... at ROWS ("8 16 17"), read in
# turn (mTAG_<run>): mhc_sweeps TAG SWEEP_SECS ROWS LABEL...
mhc_sweeps() {
  local tag=$1 sweep_secs=$2 rows=$3; shift 3
  for run in $(seq 1 "${RUNS:-2}"); do
    # shellcheck disable=SC2086  # ROWS: one argument per row count
    timeout "$sweep_secs" python benchmarks/tile_sweep.py --ops mhc --rows $rows --only "$@" --out "$R/m${tag}_$run" > "$OUT/m${tag}_$run.log" 2>&1; el "m${tag}_$run" $?
    grep -hE "^\| mhc" "$R"/m${tag}_$run/*.md | cut -d'|' -f3-8
  done
}
# An mHC check in two steps (parts 78 and 80-84): the GPU parity tests that -k PATTERN picks
# in tests/runtime/test_kernels_parity_mhc.py (log $OUT/parTAG.log), then mhc_sweeps:
# mhc_check TAG PARITY_SECS PATTERN SWEEP_SECS ROWS LABEL...
mhc_check() {
  local tag=$1 parity_secs=$2 pattern=$3; shift 3
  timeout "$parity_secs" python -m pytest -q -p no:cacheprovider --tb=line -m gpu tests/runtime/test_kernels_parity_mhc.py -k "$pattern" > "$OUT/par$tag.log" 2>&1; el "par$tag" $?
  grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/par$tag.log" | tail -6
  mhc_sweeps "$tag" "$@"
}
for PART in "${@:-1}"; do  # several parts in one call run in turn
if [ "$PART" = 1 ]; then
timeout 200 python -m pytest -q -p no:cacheprovider --tb=line tests/runtime/test_kernels_parity_*.py tests/runtime/test_static_ring_attention.py -k "packed_ring_attention_gpu or mhc_finish_forms_parity_gpu or column_blocks_parity_gpu or attention_parity_gpu or mhc_parity_gpu" > "$OUT/parity.log" 2>&1; el parity $?
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/parity.log" | tail -8
timeout 150 python benchmarks/tile_sweep.py --ops mhc --rows 1 2 8 64 512 4096 --out "$R" > "$OUT/mhc_sweep.log" 2>&1; el mhc_sweep $?
grep -E "^\| mhc" "$OUT/mhc_sweep.log" | head -80
for t in 1 8 64; do
  case $t in 1) x=16;; 8) x=16;; 64) x=4;; esac
  timeout 150 python benchmarks/attention_tiles.py --t $t --block-h 16 32 --block-n 16 32 --warps 4 8 --stages 3 --splits $x --merge-d 0 64 256 --programs 0 256 --out "$R/att$t" > "$OUT/att$t.log" 2>&1; el att$t $?
  grep -E "table .* best|AttentionTile" "$OUT/att$t.log"
done
elif [ "$PART" = 3 ]; then
timeout 150 python -m pytest -q -p no:cacheprovider --tb=line tests/runtime/test_kernels_indexer_tiles.py tests/runtime/test_kernels_parity_*.py -k "indexer or several_key_tiles" > "$OUT/parity.log" 2>&1; el parity $?
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/parity.log" | tail -8
timeout 150 python benchmarks/tile_sweep.py --ops indexer --rows 1 --out "$R/idx" > "$OUT/idx.log" 2>&1; el idx $?
timeout 150 python benchmarks/gate_tiles.py --sweep --scales mid --rows 4096 --out "$R/gate" > "$OUT/gate.log" 2>&1; el gate $?
timeout 150 python benchmarks/tile_sweep.py --ops rope_quant --rows 1 8 64 4096 --out "$R/rq" > "$OUT/rq.log" 2>&1; el rq $?
timeout 120 ncu --clock-control none --profile-from-start off --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis -o "$R/prof" python benchmarks/profile_ops.py mhc:mid:512 mhc:mid:4096 mhc:flash:4096 > "$OUT/ncu.log" 2>&1; el ncu $?
ncu -i "$R/prof.ncu-rep" --page details 2>/dev/null > "$R/ncu_details.txt"; el ncu_details $?
grep -E "^\| indexer" "$R"/idx/*.md | head -100
grep -E "^\| mid \| 4096" "$R"/gate/*.md | sort -t'|' -k8 -n | head -12
elif [ "$PART" = 5 ]; then
timeout 200 python -m pytest -q -p no:cacheprovider --tb=line tests/runtime/test_kernels_parity_*.py tests/runtime/test_kernels_indexer_tiles.py -k "mhc or indexer or several_key_tiles" > "$OUT/parity.log" 2>&1; el parity $?
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/parity.log" | tail -12
timeout 100 python benchmarks/mhc_precision.py --out "$R/prec" > "$OUT/prec.log" 2>&1; el prec $?
grep -E "^\|" "$R"/prec/*.md
timeout 200 python benchmarks/tile_sweep.py --ops mhc --rows 1 8 64 512 4096 --out "$R/mhc" > "$OUT/mhc.log" 2>&1; el mhc $?
grep -E "^\| mhc" "$R"/mhc/*.md | cut -d'|' -f3-9
timeout 100 python benchmarks/tile_sweep.py --ops indexer --rows 1 --out "$R/idx" > "$OUT/idx.log" 2>&1; el idx $?
grep -E "^\| indexer" "$R"/idx/*.md | cut -d'|' -f3-9 | grep -v "N=8192"
elif [ "$PART" = 6 ]; then
timeout 300 python -m pytest -q -p no:cacheprovider --tb=line tests/runtime/test_kernels_parity_*.py tests/runtime/test_kernels_indexer_tiles.py -k "mhc_pinned or mhc_parity_gpu or indexer_parity_gpu or several_key_tiles or mhc_projection_modes_parity_gpu" > "$OUT/parity.log" 2>&1; el parity $?
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/parity.log" | tail -12
timeout 200 python benchmarks/tile_sweep.py --ops mhc --rows 256 512 1024 --out "$R/mhc" > "$OUT/mhc.log" 2>&1; el mhc $?
grep -E "^\| mhc" "$R"/mhc/*.md | cut -d"|" -f3-9
elif [ "$PART" = 7 ]; then
timeout 150 python benchmarks/tile_sweep.py --ops mhc --rows 1 2 8 --out "$R/mhc" > "$OUT/mhc.log" 2>&1; el mhc $?
grep -E "^- (mid|flash) T=" "$R"/mhc/*.md
timeout 150 ncu --clock-control none --profile-from-start off --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis -o "$R/prof" python benchmarks/profile_ops.py mhc:flash:8 mhc:mid:8 mhc:flash:1 gate:mid:1 gate:flash:8 > "$OUT/ncu.log" 2>&1; el ncu $?
ncu -i "$R/prof.ncu-rep" --page details 2>/dev/null > "$R/ncu_details.txt"; el ncu_details $?
grep -E "_kernel|Duration|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Grid Size|Block Size" "$R/ncu_details.txt" | head -80
elif [ "$PART" = 8 ]; then
timeout 300 ncu --clock-control none --profile-from-start off --set full --import-source yes -o "$R/src" python benchmarks/profile_ops.py gate:mid:1 gate:flash:8 mhc:mid:1 mhc:flash:8 > "$OUT/ncu.log" 2>&1; el ncu $?
ncu -i "$R/src.ncu-rep" --page details 2>/dev/null > "$R/src_details.txt"; el details $?
for how in cuda,sass sass cuda; do
  ncu -i "$R/src.ncu-rep" --page source --print-source $how --csv > "$R/src_${how/,/_}.csv" 2> "$R/src_${how/,/_}.err"; el "source $how" $?
done
grep -E "_kernel \(|Duration|Warp Cycles Per Issued" "$R/src_details.txt" | head -40
python benchmarks/ncu_source_lines.py "$R/src_cuda_sass.csv" --top 8 | tee "$OUT/source_lines.txt"
elif [ "$PART" = 9 ]; then
# base/mhc.py and base/gate.py (made before the call: git show b2eb990:runtime/kernels/mhc.py
# > base/mhc.py, the same for gate.py; untracked, so they travel with the tree): the mHC
# finish before its loads were reordered, the gate before its bias load was
BASE=""; [ -f base/mhc.py ] && BASE="--baseline base"
GBASE=""; [ -f base/gate.py ] && GBASE="--baseline base"
timeout 240 python -m pytest -q -p no:cacheprovider --tb=short tests/runtime/test_kernels_parity_*.py -k "mhc_parity_gpu or mhc_finish_forms_parity_gpu or mhc_pinned or (gate_parity_gpu and default) or gate_graph_replay" > "$OUT/parity.log" 2>&1; el parity $?
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/parity.log" | tail -5
for it in 20 1; do
  timeout 150 python benchmarks/tile_sweep.py --ops mhc --rows 1 8 64 --sinkhorn-iters $it $BASE --out "$R/mhc$it" > "$OUT/mhc$it.log" 2>&1; el mhc$it $?
  grep -E "^- (mid|flash) T=[0-9]+ (default|baseline):" "$R"/mhc$it/*.md
done
for k in 6 1; do
  timeout 150 python benchmarks/gate_tiles.py --rows 1,8,64 --topk $k $GBASE --out "$R/gate$k" > "$OUT/gate$k.log" 2>&1; el gate$k $?
  grep -E "^\| (mid|flash) \| [0-9]+ \| (new|two launches|baseline) " "$R"/gate$k/*.md | cut -d"|" -f2-4,8
  grep -E "^- (mid|flash) T=" "$R"/gate$k/*.md
done
elif [ "$PART" = 10 ]; then
# bis/b0_b2eb990, bis/b1_skip_xsq, bis/b2_hoist_scales (untracked, made before the call:
# b2eb990's mhc.py; it with the coefficients' program skipping the x^2 partials; today's
# with NORM_ONCE off): which step of dc1885e made the 64-row finish slower (part 9: mid
# 10.2 -> 17.4 us per launch); "regs finish" is the register Sinkhorn with FAST_RCP
BIS=""; [ -d bis ] && BIS="--baseline $(ls -d bis/*/ | tr '\n' ' ')"
timeout 200 python -m pytest -q -p no:cacheprovider --tb=short tests/runtime/test_kernels_parity_*.py -k "mhc_parity_gpu or mhc_finish_forms_parity_gpu or (gate_parity_gpu and default) or gate_graph_replay" > "$OUT/parity.log" 2>&1; el parity $?
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/parity.log" | tail -5
for it in 20 1; do
  timeout 170 python benchmarks/tile_sweep.py --ops mhc --rows 1 8 64 --sinkhorn-iters $it $BIS --out "$R/mhc$it" > "$OUT/mhc$it.log" 2>&1; el mhc$it $?
  grep -E "^- (mid|flash) T=[0-9]+ (default|regs finish|baseline.*):" "$R"/mhc$it/*.md
  grep -E "^\| mhc \| .* \| (default|regs finish|baseline.*) \|" "$R"/mhc$it/*.md | cut -d"|" -f3-5,7
done
elif [ "$PART" = 11 ]; then
# the decode finish's coefficients in registers with FAST_RCP, the scales first only at one
# row per program, NORM_ONCE gone (tile_sweep_h200_finish_steps.md); bis/b0_b2eb990 and
# bis/b1_skip_xsq as in part 10; then the kernel table
BIS=""; [ -d bis ] && BIS="--baseline $(ls -d bis/*/ | tr '\n' ' ')"
timeout 150 python -m pytest -q -p no:cacheprovider --tb=short tests/runtime/test_kernels_parity_*.py -k "mhc_parity_gpu or mhc_finish_forms_parity_gpu or mhc_pinned" > "$OUT/parity.log" 2>&1; el parity $?
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/parity.log" | tail -5
timeout 170 python benchmarks/tile_sweep.py --ops mhc --rows 1 8 64 $BIS --out "$R/mhc" > "$OUT/mhc.log" 2>&1; el mhc $?
grep -E "^- (mid|flash) T=[0-9]+ (default|tensor finish|regs finish.*|baseline.*):" "$R"/mhc/*.md
grep -E "^\| mhc \| .* \| (default|tensor finish|regs finish.*|baseline.*) \|" "$R"/mhc/*.md | cut -d"|" -f3-5,7
timeout 300 python benchmarks/kernels.py --out "$R/kern" > "$OUT/kern.log" 2>&1; el kern $?
grep -E "^\||met on|own measured" "$R"/kern/kernels_*.md | tail -92
elif [ "$PART" = 12 ]; then
# the register Sinkhorn folded into one loop (after part 11): GPU parity, and the decode
# finish timed again next to bis/b0_b2eb990 (part 11's default: mid 3.67 / 3.69 us, flash
# 4.05 / 4.28 per finishing launch at 1 / 8 rows)
BIS=""; [ -d bis ] && BIS="--baseline $(ls -d bis/*/ | tr '\n' ' ')"
timeout 150 python -m pytest -q -p no:cacheprovider --tb=short tests/runtime/test_kernels_parity_*.py -k "mhc_parity_gpu or mhc_finish_forms_parity_gpu or mhc_pinned" > "$OUT/parity.log" 2>&1; el parity $?
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/parity.log" | tail -5
timeout 150 python benchmarks/tile_sweep.py --ops mhc --rows 1 8 $BIS --out "$R/mhc" > "$OUT/mhc.log" 2>&1; el mhc $?
grep -E "^- (mid|flash) T=[0-9]+ (default|tensor finish|regs finish.*|baseline.*):" "$R"/mhc/*.md
grep -E "^\| mhc \| .* \| (default|tensor finish|regs finish.*|baseline.*) \|" "$R"/mhc/*.md | cut -d"|" -f3-5,7
elif [ "$PART" = 13 ]; then
# above decode: finishing programs of one row with the register coefficients ("finish 1
# row": at 64 rows each coefficients' program of 8 rows reads 8 x 64 splits' partials, 9.7 us
# per finishing launch at mid), and decode's tiles up to 512 rows ("decode tiles to 512")
timeout 120 python -m pytest -q -p no:cacheprovider --tb=short tests/runtime/test_kernels_parity_*.py -k "mhc_parity_gpu" > "$OUT/parity.log" 2>&1; el parity $?
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/parity.log" | tail -5
timeout 300 python benchmarks/tile_sweep.py --ops mhc --rows 64 512 --out "$R/mhc" > "$OUT/mhc.log" 2>&1; el mhc $?
grep -E "^- (mid|flash) T=[0-9]+ (default|finish 1 row|decode tiles to 512|regs finish):" "$R"/mhc/*.md
grep -E "^\| mhc \| " "$R"/mhc/*.md | cut -d"|" -f3-5,7
elif [ "$PART" = 14 ]; then
# session 18: RoPE + quant in head / tail programs with the e2m1 rounding by two adds, next to
# bis/rq_c6e7157 (git show c6e7157:runtime/kernels/rope_quant.py) and bis/rq_e2m1 (that kernel
# with only the two adds); the mHC decode finish up to 256 rows, the register coefficients above
BIS=""; [ -d bis ] && BIS="--baseline $(ls -d bis/*/ | tr '\n' ' ')"
timeout 240 python -m pytest -q -p no:cacheprovider --tb=short tests/runtime/test_kernels_rope_quant.py tests/runtime/test_kv_packing.py tests/runtime/test_kernels_compress.py tests/runtime/test_kernels_parity_*.py -k "rope or pack or compress or mhc_parity_gpu or mhc_finish_forms" > "$OUT/parity.log" 2>&1; el parity $?
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/parity.log" | tail -8
timeout 120 python benchmarks/tile_sweep.py --ops rope_quant --rows 1 8 64 4096 $BIS --out "$R/rq" > "$OUT/rq.log" 2>&1; el rq $?
grep -E "^\| rope_quant" "$R"/rq/*.md | cut -d"|" -f3-5,7,8
timeout 240 python benchmarks/tile_sweep.py --ops mhc --rows 64 128 256 512 1024 4096 --out "$R/mhc" > "$OUT/mhc.log" 2>&1; el mhc $?
grep -E "^\| mhc \| .* \| (default|before session 18|finish 8 rows|tensor finish|decode finish to 64|decode tiles to 512) \|" "$R"/mhc/*.md | cut -d"|" -f3-5,7
elif [ "$PART" = 15 ]; then
# session 18: inverse RoPE with one load and one store per head (pairs split in registers)
# and compress with its norm weight loaded first, next to bis/before_s18 (git show
# c6e7157:runtime/kernels/inv_rope.py and compress.py: label "baseline")
BIS=""; [ -d bis ] && BIS="--baseline $(ls -d bis/*/ | tr '\n' ' ')"
timeout 150 python -m pytest -q -p no:cacheprovider --tb=short tests/runtime/test_kernels_compress.py tests/runtime/test_kernels_parity_*.py -k "compress or inv_rope" > "$OUT/parity.log" 2>&1; el parity $?
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/parity.log" | tail -8
timeout 150 python benchmarks/tile_sweep.py --ops inv_rope compress --rows 1 8 64 512 4096 $BIS --out "$R/ic" > "$OUT/ic.log" 2>&1; el ic $?
grep -E "^\| (inv_rope|compress)" "$R"/ic/*.md | cut -d"|" -f2-5,7,8
elif [ "$PART" = 16 ]; then
# session 18: smaller RoPE + quant tiles for the small calls of head / tail programs (the
# MXFP4 index queries were 0.05-0.1 us slower at 1-64 rows), compress on 1-2 warps
timeout 200 python benchmarks/tile_sweep.py --ops rope_quant compress --rows 1 8 64 4096 --out "$R/rc" > "$OUT/rc.log" 2>&1; el rc $?
grep -E "^\| (rope_quant|compress)" "$R"/rc/*.md | cut -d"|" -f3-5,7,8
elif [ "$PART" = 17 ]; then
# session 19: the 128-channel MXFP4 index queries taken whole by the rotating programs at
# every size, in head / tail programs at every size, and the default (whole below 2^16
# elements); FP8 / NVFP4 run the same launch in every label (a measure of the run's noise).
# Session 19 ran it as "--only default 'whole vectors below 512'" before the default took
# small calls whole (tile_sweep_h200_rope_quant_whole.md). Rows print as they are timed.
timeout 170 python benchmarks/tile_sweep.py --ops rope_quant --rows 1 8 64 4096 --only default "whole vectors below 512" "head / tail programs" --out "$R/rqw" > "$OUT/rqw.log" 2>&1; el rqw $?
grep -E "^\| rope_quant" "$R"/rqw/*.md | cut -d"|" -f3-5,7,8
elif [ "$PART" = 18 ]; then
# session 19: the gate's --stages variants (GatePolicy.block_m / num_stages; one program per
# 32 / 64 rows over all of D) where every tiling stayed at 27-41 % (gate_tiles_h200_sweep_mid_4096.md),
# and the decode selection's launch on 1 / 2 warps (select_warps: one warp's reductions need
# no shared memory or barrier; static sm_90: BAR 39 -> 1, instructions 1,926 -> 5,152 at
# flash); GPU parity first (the interpreter ignores num_stages and warps)
# (session 20: the first run's parity step, -k gate, ran past 150 s on the interpreter-sized
# cases, and the sweep stopped at flash T=1 "tail 16K stages 4": 272 KB of shared memory;
# such a tiling is now skipped and named. Its mid rows: gate_tiles_h200_stages_first.md)
timeout 200 python -m pytest -q -p no:cacheprovider --tb=short tests/runtime/test_kernels_parity_*.py -k "gate_parity_gpu or gate_graph_replay" > "$OUT/parity.log" 2>&1; el parity $?
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/parity.log" | tail -8
timeout 200 python benchmarks/gate_tiles.py --stages --scales flash --rows 1,8,64,512,4096 --out "$R/gst" > "$OUT/gst.log" 2>&1; el gst $?
grep -E "^(mid|flash) " "$OUT/gst.log" | cut -c1-150
# the selecting launch on one / two warps again, at mid and flash, 1-4,096 rows
timeout 150 python benchmarks/gate_tiles.py --stages --scales mid,flash --rows 1,2,4,8,64,512,4096 --only new "two launches" "select w1" "select w2" "two launches select w1" "two launches select w2" "two launches select w1 rows 4" "from 2048 select w4" "m32 two launches select w1" --out "$R/gsel" > "$OUT/gsel.log" 2>&1; el gsel $?
grep -E "^(mid|flash) " "$OUT/gsel.log" | cut -c1-150
elif [ "$PART" = 19 ]; then
# session 20 left the mid 4,096-row gate at 50 % (8.0 us: partials 4.3 + selection 3.4):
# one program per 32 rows over all of D (8.75 us before the new selection rule, which it does
# not use: it selects from registers), 4 rows per selecting program on one warp (8.85 vs 9.21),
# 32-row programs, each against the default three times (gate_tiles_h200_select_repeats.md
# shows runs of one machine differ by up to 0.5 us)
for i in 1 2 3; do
  timeout 100 python benchmarks/gate_tiles.py --stages --scales mid --rows 512,4096 --only new "one program m32 d256 s3" "one program m32 d256 s4" "two launches select w1 rows 4" m32 --out "$R/g19_$i" > "$OUT/g19_$i.log" 2>&1; el g19_$i $?
done
grep -hE "^mid " "$OUT"/g19_*.log | cut -c1-110
timeout 150 python benchmarks/kernels.py --out "$R/kern" > "$OUT/kern.log" 2>&1; el kern $?
grep -E "met on" "$R"/kern/kernels_h200.md
elif [ "$PART" = 20 ]; then
# session 21 (no device lent): the register-resident top-k select (runtime/kernels/topk_resident.py:
# the chunk read once into registers, the bound's and the candidates' radix passes on registers,
# one scratch round trip; TopkSplitPolicy(resident=True)), exact on the interpreter, never timed.
# Static sm_90 (Triton 3.6): 8,192 keys on 8 warps 191-219 registers, no spills, against the
# chained kernel's 14 dependent steps (29.5 us for a 64k row at 4,096- or 8,192-key chunks).
# Also its splits as one launch (TopkSplitPolicy.resident_one_launch: the row's last chunk program,
# a ticket, selects among the candidates). GPU exactness first (resident, one launch, chained),
# then topk.py's split shapes twice with the resident rows beside the chained ones, then indexer +
# top-k at 128k with the three top-k's interleaved.
timeout 150 python -m pytest -q -p no:cacheprovider --tb=short tests/runtime/test_kernels_topk.py -k "gpu" > "$OUT/parity.log" 2>&1; el parity $?
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/parity.log" | tail -8
for i in 1 2; do
  timeout 150 python benchmarks/topk.py --shapes split --resident --chunks 4096,16384 --out "$R/topk_$i" > "$OUT/topk_$i.log" 2>&1; el topk_$i $?
done
grep -hE "policy|resident" "$OUT"/topk_1.log | cut -c1-160
timeout 120 python benchmarks/kernels.py --ops indexer+topk --topk-resident --out "$R/kern" > "$OUT/kern.log" 2>&1; el kern $?
grep -E "^\| indexer" "$R"/kern/*.md
elif [ "$PART" = 21 ]; then
# compress with every row loaded first (FusedPoolNorm(rows_first=True): one memory round trip
# on a call's path instead of three in the sm_90 code; same bits): GPU parity and the bit
# identity, then the default and its rows-first twin three times at the kernel table's rows
timeout 120 python -m pytest -q -p no:cacheprovider --tb=short tests/runtime/test_kernels_compress.py -k "compress_parity_gpu or rows_first" > "$OUT/cparity.log" 2>&1; el cparity $?
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/cparity.log" | tail -4
for i in 1 2 3; do
  timeout 60 python benchmarks/tile_sweep.py --ops compress --rows 2 64 4096 --only "tile 512 w4" "tile 512 w2" "loops tile 512 w4" "loops tile 512 w2" --out "$R/comp_$i" > "$OUT/comp_$i.log" 2>&1; el comp_$i $?
done
grep -hE "^\| compress" "$R"/comp_*/*.md | cut -d'|' -f2-9
# where decode attention's ~10 us go (1 and 8 queries: two launches, the key gather behind the
# top-k ids, the merge), and compress's smallest call (the registry's form): ncu's stall samples
# per source line (as part 8 did for the gate and mHC: ncu_h200_session16.md)
ncu_lines src 240 8 attention:mid:1 attention:mid:8 attention:flash:8 compress:mid:2
elif [ "$PART" = 22 ]; then
# session 21 (no device): mHC's sweep with the mixing, collapse and sum of squares as fused
# multiply-adds (MhcPolicy(fma_mix=True): the kernel compiles without FMA contraction, so the
# mixing was one FMUL and one FADD per term; static sm_90 under Triton 3.6: the sweeps 9-10 %
# fewer instructions, the 4,096-row tail kernel 3,253 -> 3,076, flash 8 rows' spill gone),
# untimed: GPU parity at the default's tolerances, then the default against it three times.
# Also "tf32x2" (fn split on the host, two TF32 products) now summing each stream's tile from
# zero like tf32x3 does (its 6.1e-6 from float64 against 5.0e-7 was the running-sum order:
# tf32_accumulation_cpu.md; static sm_90 it is 18-24 % fewer instructions than tf32x3): its
# precision (mhc_precision.py) and the same three timings
timeout 200 python -m pytest -q -p no:cacheprovider --tb=short tests/runtime/test_kernels_parity_*.py -k "fma_mixing_parity_gpu or mhc_projection_modes_parity_gpu" > "$OUT/mparity.log" 2>&1; el mparity $?
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/mparity.log" | tail -4
timeout 100 python benchmarks/mhc_precision.py --out "$R/prec" > "$OUT/prec.log" 2>&1; el prec $?
grep -E "^\|" "$R"/prec/*.md
for i in 1 2 3; do
  timeout 90 python benchmarks/tile_sweep.py --ops mhc --rows 1 8 64 512 4096 --only default "fma mix" tf32x2 --out "$R/mfma_$i" > "$OUT/mfma_$i.log" 2>&1; el mfma_$i $?
done
grep -hE "^\| mhc" "$R"/mfma_*/*.md | cut -d'|' -f2-9
elif [ "$PART" = 23 ]; then
# session 22 (no device): the indexer's decode calls reading every key tile up to N, the scores
# masked by the counts as before (IndexerPolicy(read_all_up_to=16)); skipping the tiles past
# every count made each key load wait for the counts' load (sm_90 PTX: no 16-byte load before
# the first branch on them), two round trips before the first key tile (8k keys at mid: 2.5 us,
# one tile per program). GPU parity and bit identity, then the default against it three times.
timeout 120 python -m pytest -q -p no:cacheprovider --tb=short tests/runtime/test_kernels_indexer_tiles.py tests/runtime/test_kernels_parity_*.py -k "indexer" > "$OUT/iparity.log" 2>&1; el iparity $?
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/iparity.log" | tail -4
for i in 1 2 3; do
  timeout 90 python benchmarks/tile_sweep.py --ops indexer --cold --only default "read all" --out "$R/idx_$i" > "$OUT/idx_$i.log" 2>&1; el idx_$i $?
done
grep -hE "^\| indexer" "$R"/idx_*/*.md | cut -d'|' -f2-11
# what one dependent step (an L2 / HBM load, a 4-warp sum or scan, a 1-warp sum, a ticket atomic) costs inside a
# replayed kernel: how many the small-op goal (2x an empty launch) leaves room for
timeout 150 python benchmarks/chain_floor.py --out "$R/chain" > "$OUT/chain.log" 2>&1; el chain $?
grep -E "^\|" "$R"/chain/*.md
elif [ "$PART" = 24 ]; then
# session 22 (no device): programmatic dependent launch for the four two-launch ops (see the
# header); first the bit identity on the GPU (on vs off, decode shapes, bf16), then the timing,
# which checks the bits again before it times
timeout 200 python -m pytest -q -p no:cacheprovider --tb=short tests/runtime/test_kernels_pdl.py > "$OUT/pdl_parity.log" 2>&1; el pdl_parity $?
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pdl_parity.log" | tail -6
timeout 420 python benchmarks/dependent_launch.py --out "$R/pdl" > "$OUT/pdl.log" 2>&1; el pdl $?
grep -E "^\|" "$R"/pdl/*.md || tail -20 "$OUT/pdl.log"
elif [ "$PART" = 25 ]; then
timeout 150 python -m pytest -q -p no:cacheprovider --tb=short tests/runtime/test_kernels_pdl.py -k "gpu and 64" > "$OUT/pdl64.log" 2>&1; el pdl64 $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/pdl64.log" | tail -8
timeout 400 python benchmarks/kernels.py --ops gate,mhc,indexer,indexer+topk --out "$R/kern25" > "$OUT/kern25.log" 2>&1; el kern25 $?
grep -E "^\||met on" "$R"/kern25/*.md | tail -60
elif [ "$PART" = 26 ]; then
for i in 1 2; do
  timeout 150 python benchmarks/tile_sweep.py --ops mhc --rows 64 128 256 512 --only default "pdl off" --out "$R/rows_$i" > "$OUT/rows_$i.log" 2>&1; el rows_$i $?
  grep -E "^\| mhc" "$R"/rows_$i/*.md | cut -d"|" -f2-8
done
elif [ "$PART" = 27 ]; then
# session 24 (no device lent): the row-bound top-k (runtime/kernels/topk_rowbound.py, off:
# TopkSplitPolicy.row_bound): exact at the indexer's shapes (its GPU tests and the shared
# top-k suite's), then timed against the chained split in two runs of the split shapes
# (randn and ReLU'd scores; each run saves after every shape, so a run cut short keeps them)
timeout 180 python -m pytest -q -p no:cacheprovider --tb=line tests/runtime/test_kernels_topk_rowbound.py tests/runtime/test_kernels_topk.py -m gpu > "$OUT/rb_gpu.log" 2>&1; el rb_gpu $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/rb_gpu.log" | tail -8
for i in 1 2; do
  timeout 190 python benchmarks/topk.py --shapes split --row-bound --chunks 4096,16384 --out "$R/topk_rb_$i" > "$OUT/topk_rb_$i.log" 2>&1; el topk_rb_$i $?
  grep -E "^\|" "$R"/topk_rb_$i/*.md | grep -E "policy|chunk" | cut -d"|" -f2-8,13-16 | head -80
done
elif [ "$PART" = 28 ]; then
# the row-bound top-k in indexer + top-k at 128k keys, next to the registry's (chained) one
timeout 150 python benchmarks/kernels.py --ops indexer+topk --topk-chained --out "$R/kern_rb" > "$OUT/kern_rb.log" 2>&1; el kern_rb $?
grep -E "^\||met on" "$R"/kern_rb/*.md | tail -20
# where each form's time goes: ncu's stall samples per source line (as part 8 for the gate and mHC)
timeout 200 ncu --clock-control none --profile-from-start off --set full --import-source yes -o "$R/src" python benchmarks/profile_ops.py topk:flash:1:131072:chained topk:flash:1:131072:resident topk:flash:1:131072:row_bound > "$OUT/ncu.log" 2>&1; el ncu $?
ncu -i "$R/src.ncu-rep" --page details 2>/dev/null > "$R/src_details.txt"; el details $?
grep -E "_kernel|Duration|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Grid Size" "$R/src_details.txt" | head -60
ncu -i "$R/src.ncu-rep" --page source --print-source cuda,sass --csv > "$R/src_cuda_sass.csv" 2> "$R/src_cuda_sass.err"; el source $?
rm -f "$R/src.ncu-rep"  # the report is large; the CSV and details are what the note reads
python benchmarks/ncu_source_lines.py "$R/src_cuda_sass.csv" --top 8 | tee "$OUT/source_lines.txt"
elif [ "$PART" = 29 ]; then
# parts 27 and 28's deciding runs in one call, for a session with under 15 minutes of device
# time: the row-bound GPU tests, indexer + top-k with it, one topk.py run (27 has the second)
timeout 150 python -m pytest -q -p no:cacheprovider --tb=line tests/runtime/test_kernels_topk_rowbound.py -m gpu > "$OUT/rb_gpu.log" 2>&1; el rb_gpu $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/rb_gpu.log" | tail -8
timeout 150 python benchmarks/kernels.py --ops indexer+topk --topk-chained --out "$R/kern_rb" > "$OUT/kern_rb.log" 2>&1; el kern_rb $?
grep -E "^\||met on" "$R"/kern_rb/*.md | tail -20
timeout 190 python benchmarks/topk.py --shapes split --row-bound --chunks 4096,16384 --out "$R/topk_rb_1" > "$OUT/topk_rb_1.log" 2>&1; el topk_rb_1 $?
grep -E "^\|" "$R"/topk_rb_1/*.md | grep -E "policy|chunk" | cut -d"|" -f2-8,13-16 | head -80
elif [ "$PART" = 30 ]; then
# session 26 (no device yet): no sweep has tried 64 heads per program at flash (64 heads), where
# each key tile would be read once for all heads instead of once per 32-head block. Compiled for
# sm_90 with Triton 3.6 on a CPU (benchmarks/results/sass_static_sm90_triton36_attention.md):
# h64 n16 / n32 on 8 warps hold 236-248 registers, no stack, and use wgmma (HGMMA), where the
# prefill row h32 n32 w4 spills 136 bytes on mma.sync. Each sweep checks every tiling against
# the reference and times the table's row in the same run; three small sweeps, so a timeout
# loses one
timeout 220 python benchmarks/attention_tiles.py --scales flash --layouts engine --t 512 --block-h 32 64 --block-n 16 32 --warps 4 8 --stages 2 3 --splits 1 --out "$R/att64_t512" > "$OUT/att64_t512.log" 2>&1; el att64_t512 $?
grep -E "table .* best" "$OUT/att64_t512.log"; grep -E "^- flash" "$R"/att64_t512/*.md | cut -c1-700
timeout 170 python benchmarks/attention_tiles.py --scales flash --layouts engine ring --t 64 --block-h 32 64 --block-n 16 32 --warps 4 8 --stages 3 --splits 2 4 --out "$R/att64_t64" > "$OUT/att64_t64.log" 2>&1; el att64_t64 $?
grep -E "table .* best" "$OUT/att64_t64.log"; grep -E "^- flash" "$R"/att64_t64/*.md | cut -c1-700
timeout 120 python benchmarks/attention_tiles.py --scales flash --layouts engine ring --t 8 --block-h 16 64 --block-n 16 32 --warps 4 8 --stages 3 --splits 16 --merge-d 256 --programs 256 --out "$R/att64_t8" > "$OUT/att64_t8.log" 2>&1; el att64_t8 $?
grep -E "table .* best" "$OUT/att64_t8.log"; grep -E "^- flash" "$R"/att64_t8/*.md | cut -c1-700
elif [ "$PART" = 31 ]; then
# session 26's two new defaults: flash attention's 64-head rows (WIDE_TILES in
# runtime/kernels/attention_tiles.py) and the row-bound top-k (TopkSplitPolicy.row_bound, its own
# 4,096-key chunks): their GPU parity tests, then the kernel table's attention and indexer + top-k
# rows, the chained top-k beside the row-bound one
timeout 170 python -m pytest -q -p no:cacheprovider --tb=line tests/runtime/test_kernels_topk_rowbound.py tests/runtime/test_kernels_parity_*.py -m gpu -k "row_bound_policy_gpu or attention_parity_gpu" > "$OUT/flip_gpu.log" 2>&1; el flip_gpu $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/flip_gpu.log" | tail -8
timeout 260 python benchmarks/kernels.py --ops attention,indexer+topk --topk-chained --out "$R/kern31" > "$OUT/kern31.log" 2>&1; el kern31 $?
grep -E "^\||met on|paired" "$R"/kern31/*.md | tail -40
# the shared prefill row (now mid's) on 2 stages instead of 3: one session-26 run had 128.8 vs
# 133.2 us (mid 512 queries), and flash's 32-head tile 345 vs 370 in both of its runs; two more
for i in 1 2; do
  timeout 60 python benchmarks/attention_tiles.py --scales mid --layouts engine ring --t 512 --block-h 32 --block-n 32 --warps 4 --stages 2 3 --splits 1 --out "$R/mid_t512_$i" > "$OUT/mid_t512_$i.log" 2>&1; el mid_t512_$i $?
  grep -E "^- mid" "$R"/mid_t512_$i/*.md | cut -c1-300
done
elif [ "$PART" = 32 ]; then
# session 27: the row-bound select's last launch in a first tile of 2 x k slots (RowBound.first_list_per_k)
# when the row lists that few, the whole 8 x k tile otherwise (1,024 and 4,096 slots at k = 512);
# exact on the GPU first, then topk.py's
# "policy row bound two tiles" row beside the default's one tile, and "four maxima" (two tiles
# and maxima_per_k 4: launch B's bound over half the tile), twice
timeout 240 python -m pytest -q -p no:cacheprovider --tb=line tests/runtime/test_kernels_topk_rowbound.py -m gpu > "$OUT/rb2_gpu.log" 2>&1; el rb2_gpu $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/rb2_gpu.log" | tail -8
for i in 1 2; do
  timeout 150 python benchmarks/topk.py --shapes split --dist randn --row-bound --chunks 4096 --out "$R/topk_tiles_$i" > "$OUT/topk_tiles_$i.log" 2>&1; el topk_tiles_$i $?
  grep -E "^\|" "$R"/topk_tiles_$i/*.md | grep -E "policy" | cut -d"|" -f2-8,13-16 | head -60
done
elif [ "$PART" = 33 ]; then
# session 28: attention's top-k ids prefetched into L1 before the loop (AttentionTile.prefetch_ids,
# untimed): the sm_90 code loads tile j + 1's ids synchronously at the end of iteration j and only
# then issues its key copy. GPU parity (bits equal to the same tile without it), then each table
# row with and without it, at its own stages and the other (2 / 3), twice
timeout 150 python -m pytest -q -p no:cacheprovider --tb=line tests/runtime/test_kernels_parity_*.py -m gpu -k "prefetched_ids" > "$OUT/pf_gpu.log" 2>&1; el pf_gpu $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/pf_gpu.log" | tail -8
for i in 1 2; do
  timeout 70 python benchmarks/attention_tiles.py --scales flash --layouts engine --t 64 512 --block-h 64 --block-n 32 --warps 8 --stages 2 3 --splits 1 16 --programs 128 --prefetch-ids 0 1 --out "$R/pf_flash_$i" > "$OUT/pf_flash_$i.log" 2>&1; el pf_flash_$i $?
  timeout 70 python benchmarks/attention_tiles.py --scales mid --layouts engine --t 64 512 --block-h 32 --block-n 32 --warps 4 --stages 2 3 --splits 1 4 --programs 256 --prefetch-ids 0 1 --out "$R/pf_mid_$i" > "$OUT/pf_mid_$i.log" 2>&1; el pf_mid_$i $?
  timeout 60 python benchmarks/attention_tiles.py --scales mid flash --layouts engine ring --t 8 --block-h 16 --block-n 32 --warps 8 --stages 3 --splits 16 --merge-d 256 --programs 256 --prefetch-ids 0 1 --out "$R/pf_t8_$i" > "$OUT/pf_t8_$i.log" 2>&1; el pf_t8_$i $?
  grep -hE "^- (mid|flash) T=" "$R"/pf_*_$i/*.md | cut -c1-400
done
elif [ "$PART" = 34 ]; then
# session 28: the gate at flash with 64 rows (13.2 us, 8 % of the roofline; its partials' launch
# 8.2 us: 288 programs of 7 dependent 256-column steps) was never swept (--sweep ran 1 and 8
# rows): the sweep's tilings, the stage variants and programs 1,024 / 2,048 (shorter splits)
timeout 250 python benchmarks/gate_tiles.py --sweep --stages --scales flash --rows 64 --out "$R/gate64" > "$OUT/gate64.log" 2>&1; el gate64 $?
grep -hE "^\| flash \| 64 " "$R"/gate64/*.md | sort -t'|' -k8 -n | head -14 | cut -c1-200
elif [ "$PART" = 35 ]; then
# session 28: where flash attention's 64-head program spends its ~77 us at 512 queries (20 tiles of
# 32 keys, ~3.8 us each: far above one memory trip and the tile's 4.2 MFLOP of wgmma) and at 64
# queries: ncu's stall samples per source line (the table's tiles)
ncu_lines att_src 300 10 attention:flash:512 attention:flash:64
elif [ "$PART" = 36 ]; then
# session 28's flips (RowBound: first tile, 4 maxima per k; attention's prefill rows prefetch their
# ids; their exactness and bit identity ran in parts 32-33) in the kernel table's attention and indexer + top-k rows
# (with session 29's decode-batch rows: T requests with ring caches of their own, bf16 and packed); then
# the 64-key tiles (part 40)
timeout 300 python benchmarks/kernels.py --ops attention,attention_ring,attention_packed,indexer+topk --out "$R/kern36" > "$OUT/kern36.log" 2>&1; el kern36 $?
grep -E "^\| (attention|indexer\+topk)|met on|own measured|paired\)" "$R"/kern36/*.md | tail -32
bash "$0" 40  # the 64-key tiles
# (the ids-ahead GPU identity that stood here ran in session 29 at mid's 16 heads, 6 passed; the
# whole prefetched-ids test, 24 cases with flash's compiles, needs more than 150 s: run it alone)
elif [ "$PART" = 38 ]; then
# part 36's ids-ahead sweeps (split off so that each call stays under 10 minutes): 2 / 3 stages
for sc in flash mid; do
  case $sc in flash) hw="--block-h 64 --warps 8 --splits 16 --programs 128";; mid) hw="--block-h 32 --warps 4 --splits 4 --programs 256";; esac
  timeout 80 python benchmarks/attention_tiles.py --scales $sc --layouts engine ring --t 64 512 $hw --block-n 32 --stages 2 3 --prefetch-ids 1 --ids-ahead 0 1 --out "$R/ia_$sc" > "$OUT/ia_$sc.log" 2>&1; el ia_$sc $?
  grep -hE "^- $sc T=" "$R"/ia_$sc/*.md | cut -c1-400
done
elif [ "$PART" = 40 ]; then
# flash's 64-head tile on 64-key tiles (half the loop's barriers and id loads; sm_90 static: 255
# registers, 144 bytes of stack, 193 KB of shared memory) beside the 32-key rows
timeout 80 python benchmarks/attention_tiles.py --scales flash --layouts engine --t 64 512 --block-h 64 --block-n 32 64 --warps 8 --stages 2 --splits 16 --programs 128 --prefetch-ids 0 1 --out "$R/n64" > "$OUT/n64.log" 2>&1; el n64 $?
grep -hE "^- flash T=" "$R"/n64/*.md | cut -c1-400
elif [ "$PART" = 41 ]; then
# sessions 29-30, untimed: packed caches decoded per scale group (AttentionTile.group_decode; since
# session 30 the e2m1 value built from its bits), each split's window and top-k slots in two loops
# (AttentionTile.split_sources: a tile reads, and on packed caches decodes, one source) and the
# decoded tile computed once for both products (AttentionTile.decode_once, packed, CUDA only: Triton
# copies the decode into each product's operand layout). sm_90 static, Triton 3.6, instructions per
# key (sass_static_sm90_triton36_attention.md, "loop bodies"): mid's packed 1-query row 258, all
# three switches 53; mid's bf16 1-query row 22.3, split 15.3. This part: GPU identity (float32 bit
# for bit; bf16 within the parity tolerance where the decoded tile reaches the tensor cores through
# other code); part 43 times the switches, part 44 the packed tilings with them on. (The packed
# test: 4 switch sets x 2 scales x 3 batches x 2 dtypes, about 60 compiles.)
XD=""; python -c "import xdist" 2>/dev/null && XD="-n 8"  # the compiles on 8 cores where pytest-xdist is there
timeout 300 python -m pytest -q -p no:cacheprovider --tb=line $XD tests/runtime/test_static_ring_attention.py -m gpu -k "switch_gpu" > "$OUT/sw_gpu.log" 2>&1; el sw_gpu $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/sw_gpu.log" | tail -6
timeout 200 python -m pytest -q -p no:cacheprovider --tb=line $XD tests/runtime/test_kernels_parity_*.py -m gpu -k "split_sources" > "$OUT/ss_gpu.log" 2>&1; el ss_gpu $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/ss_gpu.log" | tail -6
elif [ "$PART" = 43 ]; then
# part 41's switches timed: every table row against its twin with each switch on, twice
for run in 1 2; do
  timeout 150 python benchmarks/attention_tiles.py --scales mid flash --layouts engine ring ring_packed --t 1 8 64 --twins split_sources group_decode decode_once --out "$R/twins$run" > "$OUT/twins$run.log" 2>&1; el twins$run $?
  grep -hE "^- (mid|flash) T=" "$R"/twins$run/*.md | cut -c1-400
done
elif [ "$PART" = 44 ]; then
# packed ring attention over tilings with the group decode and decode once on, split sources 0 / 1
# (static: 16 heads x 32 keys on 8 warps, all three on, 25.7 instructions per key against the
# table row's 258); its suggestion gives PACKED_TILES' next rows if part 43 keeps the switches
timeout 300 python benchmarks/attention_tiles.py --scales mid flash --layouts ring_packed --t 1 8 64 --block-h 16 32 --block-n 16 32 --warps 4 8 --stages 3 --splits 16 --programs 256 --group-decode 1 --decode-once 1 --split-sources 0 1 --out "$R/gdss" > "$OUT/gdss.log" 2>&1; el gdss $?
grep -hE "^- (mid|flash) T=" "$R"/gdss/*.md | cut -c1-400
grep -E "table .* best|PACKED_TILES" -A6 "$OUT/gdss.log" | tail -12
elif [ "$PART" = 45 ]; then
# session 31's flips (packed rows: 16 heads x 32 keys with group decode, split sources and decode
# once; split sources on the bf16 8- and 64-query rows): the GPU identity and parity tests at the new
# rows, part 44's packed sweep a second time, then part 42's ncu per source line
XD=""; python -c "import xdist" 2>/dev/null && XD="-n 8"
timeout 240 python -m pytest -q -p no:cacheprovider --tb=line $XD tests/runtime/test_static_ring_attention.py tests/runtime/test_kernels_parity_*.py -m gpu -k "switch_gpu or packed_ring_attention_gpu or split_sources or attention_parity_gpu" > "$OUT/flip31_gpu.log" 2>&1; el flip31_gpu $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/flip31_gpu.log" | tail -8
bash "$0" 44 42
elif [ "$PART" = 47 ]; then
# session 32's flips (ids ahead in the decode rows, packed 1- / 8-query rows retiled, flash's
# 8-query row without merge blocks, flash's 64-head rows on 64 keys with the ids prefetched): the
# attention GPU tests (166 passed on the H100 in 173 s), the kernel table's attention rows, and the
# sweeps around the rows (kernels_h100_session32_attention_final.md, attention_tiles_h100_session32_*)
XD=""; python -c "import xdist" 2>/dev/null && XD="-n 8"
timeout 280 python -m pytest -q -p no:cacheprovider --tb=line $XD tests/runtime/test_kernels_parity_*.py tests/runtime/test_static_ring_attention.py -m gpu -k "attention or ring" > "$OUT/flip32_gpu.log" 2>&1; el flip32_gpu $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/flip32_gpu.log" | tail -8
timeout 120 python benchmarks/kernels.py --ops attention,attention_ring,attention_packed --out "$R/kern47" > "$OUT/kern47.log" 2>&1; el kern47 $?
grep -E "^\| attention" "$R"/kern47/*.md | cut -d'|' -f2-4,8-9,13-14,17
timeout 100 python benchmarks/attention_tiles.py --scales mid flash --layouts engine ring --t 1 --block-h 16 --block-n 64 --warps 8 --stages 2 --splits 16 --merge-d 64 --ids-ahead 0 1 --split-sources 1 --out "$R/t1" > "$OUT/t1.log" 2>&1; el t1 $?
timeout 100 python benchmarks/attention_tiles.py --scales mid flash --layouts engine ring --t 8 --block-h 16 --block-n 32 --warps 4 --stages 2 --splits 16 --programs 256 --merge-d 0 256 --ids-ahead 1 --split-sources 1 --out "$R/t8" > "$OUT/t8.log" 2>&1; el t8 $?
timeout 100 python benchmarks/attention_tiles.py --scales mid flash --layouts ring_packed --t 1 8 64 --block-h 16 --block-n 32 64 --warps 4 8 --stages 2 3 --splits 16 --programs 256 --ids-ahead 1 --group-decode 1 --decode-once 1 --split-sources 1 --out "$R/pk" > "$OUT/pk.log" 2>&1; el pk $?
timeout 100 python benchmarks/attention_tiles.py --scales flash --layouts engine ring --t 64 512 --block-h 64 --block-n 32 64 --warps 8 --stages 2 --splits 16 --programs 128 --prefetch-ids 0 1 --split-sources 1 --out "$R/n64" > "$OUT/n64.log" 2>&1; el n64 $?
grep -hE "^- (mid|flash) T=" "$R"/t1/*.md "$R"/t8/*.md "$R"/pk/*.md "$R"/n64/*.md | cut -c1-300
elif [ "$PART" = 48 ]; then
# session 33: the merge in the partial launch's last program (AttentionTile.merge_tail, untimed) and
# mid's packed rows (8 queries on 64 keys / 8 warps, 64 on 2 stages; flash keeps its rows in
# PACKED_WIDE_TILES): the GPU tests, every decode row against its twin with the tail twice, the
# 64-query rows with the tail over split counts, and the table's attention rows
XD=""; python -c "import xdist" 2>/dev/null && XD="-n 8"
timeout 200 python -m pytest -q -p no:cacheprovider --tb=line $XD tests/runtime/test_kernels_parity_*.py tests/runtime/test_static_ring_attention.py -m gpu -k "merge_tail or packed_ring or switch_gpu" > "$OUT/tail_gpu.log" 2>&1; el tail_gpu $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/tail_gpu.log" | tail -8
for run in 1 2; do
  timeout 120 python benchmarks/attention_tiles.py --scales mid flash --layouts engine ring ring_packed --t 1 8 64 --twins merge_tail --out "$R/mt$run" > "$OUT/mt$run.log" 2>&1; el mt$run $?
  grep -hE "^- (mid|flash) T=" "$R"/mt$run/*.md | cut -c1-300
done
timeout 120 python benchmarks/attention_tiles.py --scales mid flash --layouts ring_packed --t 64 --block-h 16 --block-n 32 --warps 4 --stages 2 3 --splits 2 4 8 16 --programs 0 --ids-ahead 1 --group-decode 1 --decode-once 1 --split-sources 1 --merge-tail 0 1 --out "$R/mtx" > "$OUT/mtx.log" 2>&1; el mtx $?
grep -hE "^- (mid|flash) T=" "$R"/mtx/*.md | cut -c1-400
timeout 120 python benchmarks/kernels.py --ops attention,attention_ring,attention_packed --out "$R/kern48" > "$OUT/kern48.log" 2>&1; el kern48 $?
grep -E "^\| attention" "$R"/kern48/*.md | cut -d'|' -f2-4,8-9,13-14,17
elif [ "$PART" = 49 ]; then
# after session 33's compress flip (every row loaded first): its tiles and warps again at the
# table's rows, twice (2 and 64 rows sit at 1.90 / 2.01 us against a 2x-empty limit of ~1.94-1.99),
# then the indexer's tilings at its small decode calls (1 query on 8,192 keys: 2.3-2.4 us), then the merge tail's twins; 4 in a call of its own
for i in 1 2; do
  timeout 100 python benchmarks/tile_sweep.py --ops compress --rows 2 64 4096 --out "$R/comp49_$i" > "$OUT/comp49_$i.log" 2>&1; el comp49_$i $?
  grep -hE "^\| compress" "$R"/comp49_$i/*.md | cut -d'|' -f2-7
done
timeout 150 python benchmarks/tile_sweep.py --ops indexer --out "$R/ix49" > "$OUT/ix49.log" 2>&1; el ix49 $?
grep -hE "^\| indexer" "$R"/ix49/*.md | cut -d'|' -f2-7
# the merge tail (off: it lost on the H100 at every row with a merge) against the rows, once more
timeout 120 python benchmarks/attention_tiles.py --scales mid flash --layouts engine ring ring_packed --t 8 64 --twins merge_tail --out "$R/mt49" > "$OUT/mt49.log" 2>&1; el mt49 $?
grep -hE "^- (mid|flash) T=" "$R"/mt49/*.md | cut -c1-300
elif [ "$PART" = 50 ]; then
# session 34: the indexer's programs of one key tile against a wide query tile on 8 warps (part
# 49's sweep: 8 mid queries at 8k keys 3.38 -> 2.97 us): the GPU parity tests, then the rule's
# neighbours twice (4 / 8 warps, 32- and 128-key tiles) at 1-16 queries on 8k-32k keys and at 128k
# keys, then the kernel table's indexer rows
timeout 150 python -m pytest -q -p no:cacheprovider --tb=line tests/runtime/test_kernels_indexer_tiles.py tests/runtime/test_kernels_parity_*.py -m gpu -k "indexer or several_key_tiles" > "$OUT/ix50_gpu.log" 2>&1; el ix50_gpu $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/ix50_gpu.log" | tail -6
for i in 1 2; do
  timeout 100 python benchmarks/tile_sweep.py --ops indexer --indexer-shapes 1:8192 2:8192 4:8192 8:8192 16:8192 8:16384 8:32768 8:131072 --only default w4 w8 n32 n128 "n128 w8" --out "$R/ix50_$i" > "$OUT/ix50_$i.log" 2>&1; el ix50_$i $?
  grep -hE "^\| indexer" "$R"/ix50_$i/*.md | cut -d'|' -f3-7
done
timeout 120 python benchmarks/kernels.py --ops indexer --out "$R/kern50" > "$OUT/kern50.log" 2>&1; el kern50 $?
grep -E "^\| indexer" "$R"/kern50/*.md | cut -d'|' -f2-4,8-9,11,13-14,17
elif [ "$PART" = 51 ]; then
# session 34, timings first (a session with little device time gets them even if cut short): attention's
# merge launch on 1 / 2 / 8 warps (AttentionTile.merge_warps, untimed; Triton's 4 until now), every
# decode row beside its twins; compress's small calls on more warps (each thread fewer channels: 468
# instructions per thread on 4 warps, 333 on 8, 257 on 16, static sm_90; 64 rows sit at 1.98-2.03 us
# against a strict limit of ~1.94), the 512-channel tiles on 2-16 warps; then both GPU parity tests,
# then the compress sweep again
timeout 240 python benchmarks/attention_tiles.py --scales mid flash --layouts engine ring ring_packed --t 1 8 64 --merge-warps-twins 1 2 8 --out "$R/mw51" > "$OUT/mw51.log" 2>&1; el mw51 $?
grep -hE "^- (mid|flash) T=" "$R"/mw51/*.md | cut -c1-400
for i in 1 2; do
  timeout 100 python benchmarks/tile_sweep.py --ops compress --rows 2 64 512 4096 --only "tile 512 w2" "tile 512 w4" "tile 512 w8" "tile 512 w16" "tile 1024 w4" "tile 1024 w8" --out "$R/comp51_$i" > "$OUT/comp51_$i.log" 2>&1; el comp51_$i $?
  grep -hE "^\| compress" "$R"/comp51_$i/*.md | cut -d'|' -f3-7,9
  if [ $i = 1 ]; then
    XD=""; python -c "import xdist" 2>/dev/null && XD="-n 8"
    timeout 150 python -m pytest -q -p no:cacheprovider --tb=line $XD tests/runtime/test_kernels_parity_*.py tests/runtime/test_kernels_compress.py -m gpu -k "merge_warps or compress_parity" > "$OUT/gpu51.log" 2>&1; el gpu51 $?
    grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/gpu51.log" | tail -6
  fi
done
elif [ "$PART" = 52 ]; then
# session 35, after part 51 (one run: the packed 1- / 8-query rows' merge on 8 warps mid 11.9 -> 10.8
# / 12.2 -> 11.2, flash 1 query 11.9 -> 10.7; compress on 8 warps faster up to 256 programs in both
# sweeps): the new defaults (packed rows merge_warps=8, compress 8 warps up to 256 programs) against
# their twins once more, the row counts around compress's boundary, the GPU parity tests of both, and
# the table's compress and packed rows
timeout 120 python benchmarks/attention_tiles.py --scales mid flash --layouts engine ring ring_packed --t 1 8 --merge-warps-twins 4 1 8 --out "$R/mw52" > "$OUT/mw52.log" 2>&1; el mw52 $?
grep -hE "^- (mid|flash) T=" "$R"/mw52/*.md | cut -c1-400
timeout 100 python benchmarks/tile_sweep.py --ops compress --rows 2 64 512 1024 2048 4096 --only default "tile 512 w4" "tile 512 w8" --out "$R/comp52" > "$OUT/comp52.log" 2>&1; el comp52 $?
grep -hE "^\| compress" "$R"/comp52/*.md | cut -d'|' -f3-7,9
XD=""; python -c "import xdist" 2>/dev/null && XD="-n 8"
timeout 180 python -m pytest -q -p no:cacheprovider --tb=line $XD tests/runtime/test_kernels_parity_*.py tests/runtime/test_kernels_compress.py tests/runtime/test_static_ring_attention.py -m gpu -k "compress_parity or packed" > "$OUT/gpu52.log" 2>&1; el gpu52 $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/gpu52.log" | tail -6
timeout 150 python benchmarks/kernels.py --ops compress,attention_packed --out "$R/kern52" > "$OUT/kern52.log" 2>&1; el kern52 $?
grep -E "^\| (compress|attention_packed)" "$R"/kern52/*.md | cut -d'|' -f2-4,8-9,11,13-14,17
elif [ "$PART" = 53 ]; then
# session 35, after part 52: flash's 1-query unpacked row with its merge on one warp (WIDE_TILES, twice
# faster in parts 51 / 52): the merge-warps GPU parity tests (64 heads at one query included), then the
# table's attention rows
XD=""; python -c "import xdist" 2>/dev/null && XD="-n 8"
timeout 150 python -m pytest -q -p no:cacheprovider --tb=line $XD tests/runtime/test_kernels_parity_*.py tests/runtime/test_attention_tiles.py -m gpu -k "merge_warps or wide" > "$OUT/gpu53.log" 2>&1; el gpu53 $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/gpu53.log" | tail -6
timeout 150 python benchmarks/kernels.py --ops attention,attention_ring --out "$R/kern53" > "$OUT/kern53.log" 2>&1; el kern53 $?
grep -E "^\| attention" "$R"/kern53/*.md | cut -d'|' -f2-4,8-9,11,13-14,17
elif [ "$PART" = 54 ]; then
# after session 35: compress's 8 warps past its 256-program boundary (part 52, once: 2,048 rows, 1,024
# programs, 3.44 / 3.45 against 3.58 / 3.59 us on 4 warps; tied at 1,024 rows, behind at 4,096), twice,
# at the row counts between; run after 4 (the whole table) in a call of its own or beside a short part
for i in 1 2; do
  timeout 100 python benchmarks/tile_sweep.py --ops compress --rows 512 1024 2048 3072 4096 --only default "tile 512 w4" "tile 512 w8" --out "$R/comp54_$i" > "$OUT/comp54_$i.log" 2>&1; el comp54_$i $?
  grep -hE "^\| compress" "$R"/comp54_$i/*.md | cut -d'|' -f3-7,9
done
elif [ "$PART" = 55 ]; then
# session 36: (1) the 64-query rows' merge on 1 / 2 warps, seen once in part 51 (mid packed on 2 warps
# 28.8 -> 28.4 us, flash engine on 1 warp 45.0 -> 44.1, mid engine / ring on 1 warp 19.6 -> 19.2 / 22.9
# -> 22.4), twice; (2) flash's 64-head tiles on 16 warps (untimed; static sm_90 under Triton 3.6, the
# 512-query row: 128 registers and 304 bytes of stack, against 255 and 160 on 8 warps, wgmma either
# way; on 3 stages the row asks 262,144 bytes of shared memory, over sm_90's 232,448), at 64 and 512
# queries; (3) compress's new boundary (8 warps up to 1,024 programs): the default beside its twins
# at 1,024-3,072 rows, and its GPU parity
for i in 1 2; do
  timeout 150 python benchmarks/attention_tiles.py --scales mid flash --layouts engine ring ring_packed --t 64 --merge-warps-twins 1 2 --out "$R/mw55_$i" > "$OUT/mw55_$i.log" 2>&1; el mw55_$i $?
  grep -hE "^- (mid|flash) T=" "$R"/mw55_$i/*.md | cut -c1-400
done
timeout 150 python benchmarks/attention_tiles.py --scales flash --layouts engine --t 512 --block-h 64 --block-n 64 --warps 8 16 --stages 2 --splits 1 --prefetch-ids 1 --split-sources 1 --out "$R/w16_512" > "$OUT/w16_512.log" 2>&1; el w16_512 $?
grep -hE "^- flash T=" "$R"/w16_512/*.md | cut -c1-400
timeout 150 python benchmarks/attention_tiles.py --scales flash --layouts engine ring --t 64 --block-h 64 --block-n 64 --warps 8 16 --stages 2 --splits 16 --programs 128 --prefetch-ids 1 --split-sources 1 --out "$R/w16_64" > "$OUT/w16_64.log" 2>&1; el w16_64 $?
grep -hE "^- flash T=" "$R"/w16_64/*.md | cut -c1-400
timeout 60 python benchmarks/tile_sweep.py --ops compress --rows 1024 2048 3072 --only default "tile 512 w4" "tile 512 w8" --out "$R/comp55" > "$OUT/comp55.log" 2>&1; el comp55 $?
grep -hE "^\| compress" "$R"/comp55/*.md | cut -d'|' -f3-7,9
XD=""; python -c "import xdist" 2>/dev/null && XD="-n 8"
timeout 120 python -m pytest -q -p no:cacheprovider --tb=line $XD tests/runtime/test_kernels_compress.py -m gpu -k "compress_parity" > "$OUT/gpu55.log" 2>&1; el gpu55 $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/gpu55.log" | tail -6
elif [ "$PART" = 56 ]; then
# session 36, after part 55: TILES', PACKED_TILES' and WIDE_TILES' 64-query rows merge on 1 warp. The
# attention GPU tests (the table's rows, merge warps, bf16 and packed rings), then part 4 in the same
# call ("56 4")
XD=""; python -c "import xdist" 2>/dev/null && XD="-n 8"
timeout 240 python -m pytest -q -p no:cacheprovider --tb=line $XD tests/runtime/test_kernels_parity_*.py tests/runtime/test_static_ring_attention.py tests/runtime/test_attention_tiles.py -m gpu -k "attention_parity_gpu or merge_warps or ring_attention_gpu or packed_ring or wide" > "$OUT/gpu56.log" 2>&1; el gpu56 $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/gpu56.log" | tail -6
elif [ "$PART" = 57 ]; then
# session 36: the gate's and mHC's decode tilings are the H200's best (gate_tiles_h200_sweep_mid.md,
# gate_tiles_h200_sweep_flash.md, tile_sweep_h200_mhc_*.md) and were never swept on an H100, where
# every session since 30 has run: their decode sweeps at 1 and 8 rows, once (a winner runs again
# before it flips)
for sc in mid flash; do
  timeout 170 python benchmarks/gate_tiles.py --sweep --scales $sc --rows 1,8 --out "$R/gate57_$sc" > "$OUT/gate57_$sc.log" 2>&1; el gate57_$sc $?
  grep -hE "^\| $sc \|" "$R"/gate57_$sc/*.md | cut -d'|' -f2-5,8-9 | sort -t'|' -k2,2n -k5,5n | awk -F'|' '{c[$2]++} c[$2]<=6 || $3 ~ /^ new /'
done
timeout 150 python benchmarks/tile_sweep.py --ops mhc --rows 1 8 --out "$R/mhc57" > "$OUT/mhc57.log" 2>&1; el mhc57 $?
grep -hE "^\| mhc" "$R"/mhc57/*.md | cut -d'|' -f3-7
elif [ "$PART" = 58 ]; then
# session 38: part 57's H100 winners at 8 rows, each against the default twice (and at 1 and 16 rows,
# mHC at 2 and 64 too); a winner that wins both runs flips (GatePolicy / MhcPolicy), then part 4
for run in 1 2; do
  timeout 80 python benchmarks/gate_tiles.py --sweep --scales mid --rows 1,8,16 --only new "two launches" "d256 e32 w4" --out "$R/g58_mid_$run" > "$OUT/g58_mid_$run.log" 2>&1; el g58_mid_$run $?
  timeout 80 python benchmarks/gate_tiles.py --sweep --scales flash --rows 1,8,16 --only new "d256 e32 w4" "d128 e16 w4" "d64 e32 w4" --out "$R/g58_flash_$run" > "$OUT/g58_flash_$run.log" 2>&1; el g58_flash_$run $?
  grep -hE "^\| (mid|flash) \|" "$R"/g58_*_$run/*.md | cut -d'|' -f2-5,8
  timeout 80 python benchmarks/tile_sweep.py --ops mhc --rows 1 2 8 16 64 --only default "fma mix" --out "$R/m58_$run" > "$OUT/m58_$run.log" 2>&1; el m58_$run $?
  grep -hE "^\| mhc" "$R"/m58_$run/*.md | cut -d'|' -f3-7
done
elif [ "$PART" = 60 ]; then
# session 41's flips from part 58's H100 runs (MhcPolicy.fma_mix_from 512 -> 8,
# GatePolicy.wide_experts_rows 17 -> 8): the GPU parity tests of the changed defaults, then
# each default against the old rule twice ("no fma mix", "wide from 17"), 8-256 rows
# (RUNS=1: once, for a session with little device time left)
timeout 200 python -m pytest -q -p no:cacheprovider --tb=line -m gpu tests/runtime/test_kernels_parity_*.py -k "test_mhc_parity_gpu or test_mhc_fma_mixing_parity_gpu or (test_gate_parity_gpu and default)" > "$OUT/par60.log" 2>&1; el par60 $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/par60.log" | tail -6
for run in $(seq 1 "${RUNS:-2}"); do
  timeout 90 python benchmarks/tile_sweep.py --ops mhc --rows 8 16 32 64 128 256 --only default "no fma mix" --out "$R/m60_$run" > "$OUT/m60_$run.log" 2>&1; el m60_$run $?
  grep -hE "^\| mhc" "$R"/m60_$run/*.md | cut -d'|' -f3-7
  timeout 60 python benchmarks/gate_tiles.py --scales flash --rows 1,8,16 --only new "wide from 17" --out "$R/g60_$run" > "$OUT/g60_$run.log" 2>&1; el g60_$run $?
  grep -hE "^\| flash \|" "$R"/g60_$run/*.md | cut -d'|' -f2-5,8
done
elif [ "$PART" = 61 ]; then
# session 42: mHC's "tf32x2" projection had its fn split on every call (five elementwise
# launches on the weight, inside the graphs the sweeps replay) when it trailed "tf32x3" at
# every row count (tile_sweep_h200_mhc_fma_mix_*.md); fn's split is now kept per weight
# (runtime/kernels/mhc.py, Tf32Splits). Static sm_90 (Triton 3.6, mid 4,096 rows): its
# sweep loop 732 instructions and 168 registers against the default's 1,344 and 250. Its
# GPU parity and the in-place update, then the default against it at 8-4,096 rows, twice
timeout 150 python -m pytest -q -p no:cacheprovider --tb=line tests/runtime/test_kernels_parity_*.py -k "test_mhc_projection_modes_parity_gpu and tf32 or tf32x2_splits" > "$OUT/par61.log" 2>&1; el par61 $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/par61.log" | tail -6
for run in $(seq 1 "${RUNS:-2}"); do
  timeout 150 python benchmarks/tile_sweep.py --ops mhc --rows 8 16 64 512 1024 4096 --only default tf32x2 "tf32x2 tail d32" --out "$R/m61_$run" > "$OUT/m61_$run.log" 2>&1; el m61_$run $?
  grep -hE "^\| mhc" "$R"/m61_$run/*.md | cut -d'|' -f3-7
done
elif [ "$PART" = 62 ]; then
# session 42, with under 5 minutes of device time: session 41's flips have had no GPU parity
# run (part 60's first step), then "tf32x2" against the default once (part 61's sweep)
timeout 150 python -m pytest -q -p no:cacheprovider --tb=line -m gpu tests/runtime/test_kernels_parity_*.py -k "test_mhc_parity_gpu or test_mhc_fma_mixing_parity_gpu or (test_gate_parity_gpu and default)" > "$OUT/par62.log" 2>&1; el par62 $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/par62.log" | tail -6
timeout 100 python benchmarks/tile_sweep.py --ops mhc --rows 4096 512 64 16 --only default tf32x2 --out "$R/m62" > "$OUT/m62.log" 2>&1; el m62 $?
grep -hE "^\| mhc" "$R"/m62/*.md | cut -d'|' -f3-7
elif [ "$PART" = 63 ]; then
# session 43: the sweep tools (tile_sweep, gate_tiles, attention_tiles) time a case's variants
# in turn (benchmarks/kernels.py's interleaved_graph_ms: each variant's graph, 9 rounds) where
# each was read alone before. Their first GPU runs, on the closest calls of sessions 41-42:
# mHC's fma mixing against the old rule at 8-64 rows (its two losses were mid 16 and flash 64
# rows), flash's gate on 32 experts at 8-16 rows, decode attention's table rows beside their
# prefetching twins (two of the three tools' new code paths: the twins and the ring core)
for run in $(seq 1 "${RUNS:-2}"); do
  timeout 90 python benchmarks/tile_sweep.py --ops mhc --rows 8 16 64 --only default "no fma mix" --out "$R/m63_$run" > "$OUT/m63_$run.log" 2>&1; el m63_$run $?
  grep -hE "^\| mhc" "$R"/m63_$run/*.md | cut -d'|' -f3-7
  timeout 60 python benchmarks/gate_tiles.py --scales flash --rows 1,8,16 --only new "wide from 17" --out "$R/g63_$run" > "$OUT/g63_$run.log" 2>&1; el g63_$run $?
  grep -hE "^\| flash \|" "$R"/g63_$run/*.md | cut -d'|' -f2-5,8
  timeout 90 python benchmarks/attention_tiles.py --scales mid --layouts engine ring --t 1 8 --twins prefetch_ids --out "$R/a63_$run" > "$OUT/a63_$run.log" 2>&1; el a63_$run $?
  grep -hE "^- mid T=" "$R"/a63_$run/*.md | cut -c1-300
done
elif [ "$PART" = 64 ]; then
# session 43: the gate's selecting launch with one row per program (GatePolicy.select_rows =
# 1) on 1, 2 or 4 warps, against the default (2 rows, 4 warps at flash), twice; flash 1-512
# rows (at 1-2 rows the default selects in the ticket's tail: "two launches ..." moves it
# out), mid at 512 and 4,096 rows (its selecting launch: 2 rows on one warp)
for run in $(seq 1 "${RUNS:-2}"); do
  timeout 120 python benchmarks/gate_tiles.py --stages --scales flash --rows 1,8,16,64,512 --only new "two launches" "rows 1 w1" "rows 1 w2" "rows 1 w4" "two launches rows 1 w1" "two launches rows 1 w2" --out "$R/g64f_$run" > "$OUT/g64f_$run.log" 2>&1; el g64f_$run $?
  grep -hE "^\| flash \|" "$R"/g64f_$run/*.md | cut -d'|' -f2-5,8
  timeout 60 python benchmarks/gate_tiles.py --stages --scales mid --rows 512,4096 --only new "rows 1 w1" "rows 1 w2" --out "$R/g64m_$run" > "$OUT/g64m_$run.log" 2>&1; el g64m_$run $?
  grep -hE "^\| mid \|" "$R"/g64m_$run/*.md | cut -d'|' -f2-5,8
done
elif [ "$PART" = 65 ]; then
# session 43, after part 64 (H100, two runs: at flash one row per selecting program on 4
# warps won at 8, 16 and 512 rows and tied at 64; at one row the second launch beat the
# ticket's tail, 6.89 / 6.77 against 7.38 / 7.27 us): the candidate rule for flash's 512
# padded experts (every call selects in a second launch, one row per program, 4 warps)
# against the default at 1-4,096 rows, twice, with 2 warps beside it
for run in $(seq 1 "${RUNS:-2}"); do
  timeout 150 python benchmarks/gate_tiles.py --stages --scales flash --rows 1,2,4,8,16,32,64,512,4096 --only new "two launches rows 1 w4" "two launches rows 1 w2" --out "$R/g65_$run" > "$OUT/g65_$run.log" 2>&1; el g65_$run $?
  grep -hE "^\| flash \|" "$R"/g65_$run/*.md | cut -d'|' -f2-5,8
done
elif [ "$PART" = 66 ]; then
# session 43's flip from parts 64-65 (GatePolicy.wide_select_from = 512: flash selects in a
# second launch at every row count, one row per program, 2 warps, 4 at one row): the gate's
# GPU parity tests, the new default against the rule before ("select 2 rows") at 1-4,096
# rows twice, then the kernel table's gate rows
timeout 150 python -m pytest -q -p no:cacheprovider --tb=line -m gpu tests/runtime/test_kernels_parity_*.py -k "test_gate_parity_gpu and (default or select or ticket)" > "$OUT/par66.log" 2>&1; el par66 $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/par66.log" | tail -6
for run in $(seq 1 "${RUNS:-2}"); do
  timeout 120 python benchmarks/gate_tiles.py --scales flash --rows 1,2,4,8,16,32,64,512,4096 --only new "select 2 rows" --out "$R/g66_$run" > "$OUT/g66_$run.log" 2>&1; el g66_$run $?
  grep -hE "^\| flash \|" "$R"/g66_$run/*.md | cut -d'|' -f2-5,8
done
timeout 150 python benchmarks/kernels.py --ops gate --out "$R/k66" > "$OUT/k66.log" 2>&1; el k66 $?
grep -hE "^\| gate|met on" "$R"/k66/kernels_*.md | cut -d'|' -f2-5,8,11,13,14,17
elif [ "$PART" = 67 ]; then
# session 43, after the flip: the selecting launch is still 3.3-3.8 us of flash's 6.4-9.3-us
# gate. The selection in groups first (GatePolicy.select_groups 2 / 4: static sm_90 under
# Triton 3.6 kept 21 barriers and added 230-730 instructions, so likely no faster) and on 8
# warps, against the default, twice; then where the selecting launch's time goes (ncu's
# stall samples per source line, flash 1 and 8 rows). Both lost everywhere; the grouped
# selection was removed after this run (its code: commit 08f7850), so the groups' labels now
# time nothing
for run in $(seq 1 "${RUNS:-2}"); do
  timeout 90 python benchmarks/gate_tiles.py --stages --scales flash --rows 1,8,64 --only new "groups 2" "groups 4" "select w8" --out "$R/g67_$run" > "$OUT/g67_$run.log" 2>&1; el g67_$run $?
  grep -hE "^\| flash \|" "$R"/g67_$run/*.md | cut -d'|' -f2-5,8
done
ncu_lines sel67 200 10 gate:flash:1 gate:flash:8
elif [ "$PART" = 68 ]; then
# session 43, with the sweeps now interleaved: the mid gate at decode (its second launch won
# at 8 rows in four sequential H100 runs, session 41, but lost at 1 row and was mixed at 16),
# at 1-64 rows, twice; then mHC's whole decode sweep at 1-16 rows once (its variants were
# last compared read one after another)
for run in $(seq 1 "${RUNS:-2}"); do
  timeout 90 python benchmarks/gate_tiles.py --stages --scales mid --rows 1,2,4,8,16,32,64 --only new "two launches" "two launches rows 1 w1" "two launches select w1 rows 4" --out "$R/g68_$run" > "$OUT/g68_$run.log" 2>&1; el g68_$run $?
  grep -hE "^\| mid \|" "$R"/g68_$run/*.md | cut -d'|' -f2-5,8
done
timeout 240 python benchmarks/tile_sweep.py --ops mhc --rows 1 2 8 16 --out "$R/m68" > "$OUT/m68.log" 2>&1; el m68 $?
grep -hE "^\| mhc" "$R"/m68/*.md | cut -d'|' -f3-7
elif [ "$PART" = 69 ]; then
# session 43's second gate flip from part 68 (GatePolicy.select_from 1,024 -> 0: every call
# selects in a second launch, mid's decode too): the gate's GPU parity tests, the new default
# against mid's decode in one launch ("one launch at decode") and the rule before session 43
# ("select 2 rows") at both scales, twice; the table's gate rows; then part 68's one-run lead
# of mHC's "tf32x2" at 8-16 decode rows, timed again
timeout 150 python -m pytest -q -p no:cacheprovider --tb=line -m gpu tests/runtime/test_kernels_parity_*.py -k "test_gate_parity_gpu and (default or select or ticket)" > "$OUT/par69.log" 2>&1; el par69 $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/par69.log" | tail -6
for run in $(seq 1 "${RUNS:-2}"); do
  timeout 90 python benchmarks/gate_tiles.py --scales mid,flash --rows 1,2,4,8,16,32,64 --only new "one launch at decode" "select 2 rows" --out "$R/g69_$run" > "$OUT/g69_$run.log" 2>&1; el g69_$run $?
  grep -hE "^\| (mid|flash) \|" "$R"/g69_$run/*.md | cut -d'|' -f2-5,8
done
timeout 120 python benchmarks/kernels.py --ops gate --out "$R/k69" > "$OUT/k69.log" 2>&1; el k69 $?
grep -hE "^\| gate|met on" "$R"/k69/kernels_*.md | cut -d'|' -f2-5,8,11,13,14,17
timeout 90 python benchmarks/tile_sweep.py --ops mhc --rows 8 16 --only default tf32x2 --out "$R/m69" > "$OUT/m69.log" 2>&1; el m69 $?
grep -hE "^\| mhc" "$R"/m69/*.md | cut -d'|' -f3-7
elif [ "$PART" = 70 ]; then
# session 43: mHC's "tf32x2" led "tf32x3" at 8 and 16 decode rows in parts 68 and 69 (the
# variants read in turn; session 42's sequential reading had a tie at 16). The candidate
# rule: "tf32x2" for the decode rows that take a dot (3-16; multiply-adds stay at 1-2):
# its GPU parity (every projection mode), then the default against it at 3-16 rows, twice
timeout 150 python -m pytest -q -p no:cacheprovider --tb=line -m gpu tests/runtime/test_kernels_parity_*.py -k "test_mhc_projection_modes_parity_gpu and tf32x2" > "$OUT/par70.log" 2>&1; el par70 $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/par70.log" | tail -6
for run in $(seq 1 "${RUNS:-2}"); do
  timeout 90 python benchmarks/tile_sweep.py --ops mhc --rows 3 4 8 16 --only default "tf32x2 from 3 rows" --out "$R/m70_$run" > "$OUT/m70_$run.log" 2>&1; el m70_$run $?
  grep -hE "^\| mhc" "$R"/m70_$run/*.md | cut -d'|' -f3-7
done
elif [ "$PART" = 71 ]; then
# session 43's mHC flip (MhcPolicy.decode_tf32x2_from = 8: "tf32x2" at 8-16 decode rows):
# the default's GPU parity (mid 16 and flash 8 rows now take it) and the split's capture
# test, then the table's mHC rows
timeout 150 python -m pytest -q -p no:cacheprovider --tb=line -m gpu tests/runtime/test_kernels_parity_*.py tests/runtime/test_mhc_tf32_split.py -k "test_mhc_parity_gpu or capture" > "$OUT/par71.log" 2>&1; el par71 $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/par71.log" | tail -6
timeout 150 python benchmarks/kernels.py --ops mhc --out "$R/k71" > "$OUT/k71.log" 2>&1; el k71 $?
grep -hE "^\| mhc|met on" "$R"/k71/kernels_*.md | cut -d'|' -f2-5,8,11,13,14,17
elif [ "$PART" = 72 ]; then
# session 44: mHC's "bf16x3" projection (runtime/kernels/mhc.py, bf16_split3: fn as three bf16
# parts split once per weight on the host, three bf16 tensor-core products on X' as stored, no
# split of X' in the kernel). Static sm_90 under Triton 3.6 (mid 4,096 rows, the default's
# tiles): the sweep loop 1,344 -> 690 instructions, 250 -> 146 registers, 30 -> 39 KB shared.
# GPU parity (in the mixing loop, re-reading X', pinned bits, the interpreter's tests compiled),
# then the coefficients against float64 beside the other modes
timeout 240 python -m pytest -q -p no:cacheprovider --tb=line -m "gpu or not gpu" tests/runtime/test_kernels_parity_*.py -k "bf16x3" > "$OUT/par72.log" 2>&1; el par72 $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/par72.log" | tail -8
timeout 120 python benchmarks/mhc_precision.py --out "$R/prec72" > "$OUT/prec72.log" 2>&1; el prec72 $?
grep -hE "^\|" "$R"/prec72/*.md
elif [ "$PART" = 73 ]; then
# session 44: "bf16x3" against the default (tf32x3 above decode, tf32x2 at 8-16 rows, the
# multiply-adds at 1-2) with the variants of a case read in turn; above decode also on 4 warps
# (489 static loop instructions, 135 registers) and the tail on 64-row blocks of 4 warps
# (Hopper's warp-group MMAs), RUNS times (default 2)
for run in $(seq 1 "${RUNS:-2}"); do
  timeout 170 python benchmarks/tile_sweep.py --ops mhc --rows 64 512 4096 --only default bf16x3 "bf16x3 w4" "bf16x3 tail t64 w4" --out "$R/m73_$run" > "$OUT/m73_$run.log" 2>&1; el m73_$run $?
  grep -hE "^\| mhc" "$R"/m73_$run/*.md | cut -d'|' -f3-8
  timeout 100 python benchmarks/tile_sweep.py --ops mhc --rows 1 8 16 --only default bf16x3 --out "$R/m73d_$run" > "$OUT/m73d_$run.log" 2>&1; el m73d_$run $?
  grep -hE "^\| mhc" "$R"/m73d_$run/*.md | cut -d'|' -f3-8
done
elif [ "$PART" = 74 ]; then
# session 44: why "bf16x3" (half the sweep's instructions) is slower from 64 rows (part 73,
# H100: mid 4,096 rows 133.8 -> 155.6 us): ncu of the tail beside the default's at mid 4,096
# rows (and 512); then its decode rows against the default's again, with 3-4 rows
ncu_lines mhc_bf16x3 200 12 mhc:mid:4096 mhc:mid:4096:bf16x3 mhc:mid:512 mhc:mid:512:bf16x3
timeout 100 python benchmarks/tile_sweep.py --ops mhc --rows 3 4 8 16 --only default bf16x3 --out "$R/m74d" > "$OUT/m74d.log" 2>&1; el m74d $?
grep -hE "^\| mhc" "$R"/m74d/*.md | cut -d'|' -f3-8
elif [ "$PART" = 75 ]; then
# session 44: the mHC sweep's pipelining stages (MhcPolicy.stages; Triton's default 3), with
# "tf32x3" (the default above decode; registers keep it to 4 programs an SM at any stage count)
# and "bf16x3" (146 registers: 22 KB of shared memory at 2 stages lets 7 programs an SM in,
# 39 KB at 3 lets 5), at 64-4,096 rows, read in turn, RUNS times (default 2)
for run in $(seq 1 "${RUNS:-2}"); do
  timeout 200 python benchmarks/tile_sweep.py --ops mhc --rows 64 512 4096 --only default s1 s2 s4 bf16x3 "bf16x3 s1" "bf16x3 s2" --out "$R/m75_$run" > "$OUT/m75_$run.log" 2>&1; el m75_$run $?
  grep -hE "^\| mhc" "$R"/m75_$run/*.md | cut -d'|' -f3-8
done
elif [ "$PART" = 76 ]; then
# session 44's flip (MhcPolicy.decode_bf16x3_from = 8: "bf16x3" at 8-16 decode rows): the
# default's GPU parity and the host splits' capture test, the default against the rule before
# it ("tf32x2 from 8 rows") and against "bf16x3" from 3 rows (4 of 4 faster than "tf32x3" at
# 3-4 rows in one run) RUNS times (default 2), then the table's mHC rows
timeout 150 python -m pytest -q -p no:cacheprovider --tb=line -m gpu tests/runtime/test_kernels_parity_*.py tests/runtime/test_mhc_tf32_split.py -k "test_mhc_parity_gpu or capture or bf16x3" > "$OUT/par76.log" 2>&1; el par76 $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/par76.log" | tail -6
for run in $(seq 1 "${RUNS:-2}"); do
  timeout 90 python benchmarks/tile_sweep.py --ops mhc --rows 3 4 8 16 --only default "tf32x2 from 8 rows" "bf16x3 from 3 rows" --out "$R/m76_$run" > "$OUT/m76_$run.log" 2>&1; el m76_$run $?
  grep -hE "^\| mhc" "$R"/m76_$run/*.md | cut -d'|' -f3-8
done
timeout 150 python benchmarks/kernels.py --ops mhc --out "$R/k76" > "$OUT/k76.log" 2>&1; el k76 $?
grep -hE "^\| mhc|met on" "$R"/k76/kernels_*.md | cut -d'|' -f2-5,8,11,13,14,17
elif [ "$PART" = 77 ]; then
# part 76 cut to under 4 minutes (session 44 had 346 s of device time left after failed
# starts): the default's mHC GPU parity (its 8- and 16-row cases take "bf16x3" now), then the
# default against the rule before and "bf16x3" from 3 rows once
timeout 120 python -m pytest -q -p no:cacheprovider --tb=line -m gpu tests/runtime/test_kernels_parity_*.py -k "test_mhc_parity_gpu" > "$OUT/par77.log" 2>&1; el par77 $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/par77.log" | tail -6
timeout 60 python benchmarks/tile_sweep.py --ops mhc --rows 3 4 8 16 --only default "tf32x2 from 8 rows" "bf16x3 from 3 rows" --out "$R/m77" > "$OUT/m77.log" 2>&1; el m77 $?
grep -hE "^\| mhc" "$R"/m77/*.md | cut -d'|' -f3-8
elif [ "$PART" = 78 ]; then
# session 45: MhcPolicy.coefficients_per_tile (the previous post and combination loaded in
# every D tile, not held through the loop) lets the "bf16x3" sweep take 64-row blocks on 2
# warps without spills (static sm_90, Triton 3.6, mid 4,096 rows: 182 registers, 63 KB of
# shared memory; at 2 stages 197 and 36 KB, 5 programs an SM), reading fn's parts once per 64
# rows: its GPU parity (and bits against the same tiles held), then against the default, "bf16x3"
# on its 32-row tiles and the same 64-row tiles held (they spill) at 512 / 4,096 rows, read in
# turn, RUNS times (default 2)
mhc_check 78 150 "coefficients_per_tile" 170 "512 4096" default bf16x3 "bf16x3 t64 per-tile" "bf16x3 t64 per-tile s2" "bf16x3 t64 s2"
elif [ "$PART" = 87 ] || [ "$PART" = 88 ]; then
# attention's GPU parity (tests/runtime/test_kernels_parity_attention.py, 122 tests) in two
# calls: on an H100 in session 49, 109 had passed when a 400 s limit cut it (the last 19 passed
# in 28 s on the warm machine), so the whole file does not fit one call beside a start
if [ "$PART" = 87 ]; then SEL="merge_warps"; else SEL="not merge_warps"; fi
timeout 400 python -m pytest -q -p no:cacheprovider --tb=line -m gpu tests/runtime/test_kernels_parity_attention.py -k "$SEL" > "$OUT/par$PART.log" 2>&1; el "par$PART" $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/par$PART.log" | tail -6
elif [ "$PART" = 86 ]; then
# session 49: the projection in a launch of its own above decode (MhcPolicy.apart_from, off by
# default; untimed): the sweep mixes, collapses and sums squares without it (static sm_90,
# Triton 3.6: 103 registers, about 15 loop instructions per (row, column, stream) element against about 42 in
# the default's tail), a second launch re-reads X' and projects it per split, then the
# finishing launch. ncu had the flash 4,096-row tail at 49 % DRAM, 8 warps an SM
# (ncu_h100_session49_mhc.md). Its GPU parity (tf32x3 and bf16x3, 256-4,096 rows), then the
# default against "apart" and its tilings at 512 / 4,096 rows, read in turn, RUNS times
mhc_check 86 200 "projection_apart_parity_gpu" 190 "512 4096" default apart "apart bf16x3" "apart d128 bf16x3" "apart t32 bf16x3"
elif [ "$PART" = 85 ]; then
# session 48's flip (MhcPolicy.narrow_decode_programs 132 up to narrow_d 2048, H100 only): mid's
# 32 D tiles split 80-192 decode rows into 80-132 programs of two or three tiles, faster than
# 264's 144-256 at every count in three runs: the default's GPU parity (test_mhc_parity_gpu now
# with mid 144 rows, the decode tilings with "p264", the rule before), then the default against
# "decode p264" and "decode p330" at 64-192 rows, read in turn, RUNS times (default 2); at flash
# the default and "decode p264" make the same grids (a check of the timer's spread)
mhc_check 85 200 "test_mhc_parity_gpu or test_mhc_decode_tilings_parity_gpu" 130 "64 80 96 112 128 144 160 176 192" default "decode p264" "decode p330"
elif [ "$PART" = 84 ]; then
# session 47's flip (MhcPolicy.decode_programs 512 -> 264, H100 only): the decode sweep fits
# two programs an SM at its 264 (three at 396), and flash 80-192 rows were 0.9-6 us faster
# than at 512, mid 144 rows 0.5 slower: the default's GPU parity (test_mhc_parity_gpu, the
# decode tilings with "p512"), the static step's GPU tests (its compiled helpers: the gate's
# PDL step as Inductor re-emits it, fixed in session 47 and not yet run on a GPU), then the
# default against 512 and 396 at 48-192 rows, and against 132 / 198 / 330 at 64-192 rows,
# read in turn, RUNS times (default 2)
timeout 200 python -m pytest -q -p no:cacheprovider --tb=line -m gpu tests/runtime/test_static_model.py > "$OUT/static84.log" 2>&1; el static84 $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/static84.log" | tail -6
mhc_check 84 200 "test_mhc_parity_gpu or test_mhc_decode_tilings_parity_gpu" 130 "48 64 80 96 112 128 144 160 176 192" default "decode p512" "decode p396"
mhc_sweeps 84t 130 "64 80 96 112 128 144 160 176 192" default "decode p132" "decode p198" "decode p330"
elif [ "$PART" = 83 ]; then
# session 46: the decode sweep (static sm_90, Triton 3.6: 128 registers, 66 KB of shared memory
# at 2 stages) fits three programs an SM, 396 on 132 SMs; flash 96 and 192 rows make 480, and
# the decode tiles lost to the tiles above decode at 96 only, won where the split fit one wave
# (MhcPolicy.decode_programs says which): GPU parity of the decode tilings, then the default
# against "decode p396" and "decode p264" at 64-192 rows, and "finish 8 rows" (the finish's
# programs: one per row and split + 1, 96 x 81 at flash 96 rows, where it took 8.88 us against
# 5.72 at 128 rows' 128 x 41), read in turn, RUNS times (default 2)
mhc_check 83 280 "test_mhc_decode_tilings_parity_gpu" 150 "64 80 96 128 160 192" default "decode p396" "decode p264" "finish 8 rows"
elif [ "$PART" = 82 ]; then
# session 46's flips, timed on an H100 only (MhcPolicy.decode_stages 0 -> 2, decode_rows 48 ->
# 192): the default's GPU parity (test_mhc_parity_gpu now with flash 192 rows, not yet run on
# a GPU; the decode tilings test now 3 stages and 32-column tiles), then the default against
# the rule before ("decode to 48 s3") and against 3 stages on the same tiles ("decode s3") at
# 3-192 rows, read in turn, RUNS times (default 2); flash 96 rows read slower in every H100 run
mhc_check 82 280 "test_mhc_parity_gpu or test_mhc_decode_tilings_parity_gpu" 150 "3 8 16 17 32 48 64 96 128 192" default "decode to 48 s3" "decode s3"
elif [ "$PART" = 81 ]; then
# session 45: the "bf16x3" decode sweep asks 124 KB of shared memory at 3 stages (static sm_90,
# Triton 3.6), one program an SM, so flash's 160-240 programs at 17-48 rows take two waves on
# 132 SMs (part 80: flash 17-20 rows slower than the tiles above decode, "tf32x3" on the decode
# tiles, 92 KB, ahead from 20 rows). 2 stages (MhcPolicy.decode_stages: 66 KB) or 32-column D
# tiles (62 KB): GPU parity, then against the default and "tf32x3 decode" at 8-48 rows, read in
# turn, RUNS times (default 2)
mhc_check 81 200 "test_mhc_decode_tilings_parity_gpu" 120 "8 16 17 24 32 48" default "decode s2" "decode d32" "d32 w2" "tf32x3 decode" "decode tiles to 16"
elif [ "$PART" = 80 ]; then
# session 45's flips (MhcPolicy.decode_bf16x3_from 8 -> 3, decode_rows 16 -> 48): the default's
# GPU parity (now with 3, 33 rows at mid and 4, 48 at flash), then at 17-48 rows the default
# against the tiles above decode ("decode tiles to 16", the rule before) and the decode tiles
# with "tf32x3" (is it the tiles or the projection?), read in turn, RUNS times (default 2)
mhc_check 80 200 "test_mhc_parity_gpu" 100 "17 24 32 40 48" default "decode tiles to 16" "tf32x3 decode"
elif [ "$PART" = 79 ]; then
# session 45: "RUNS=1 ... 77 78" fits one call; this is the second call: part 76's decode rows
# and part 78's 512 / 4,096 rows once more, then the table's mHC rows
timeout 90 python benchmarks/tile_sweep.py --ops mhc --rows 3 4 8 16 --only default "tf32x2 from 8 rows" "bf16x3 from 3 rows" --out "$R/m79d" > "$OUT/m79d.log" 2>&1; el m79d $?
grep -hE "^\| mhc" "$R"/m79d/*.md | cut -d'|' -f3-8
timeout 170 python benchmarks/tile_sweep.py --ops mhc --rows 512 4096 --only default bf16x3 "bf16x3 t64 per-tile" "bf16x3 t64 per-tile s2" "bf16x3 t64 s2" --out "$R/m79" > "$OUT/m79.log" 2>&1; el m79 $?
grep -hE "^\| mhc" "$R"/m79/*.md | cut -d'|' -f3-8
timeout 150 python benchmarks/kernels.py --ops mhc --out "$R/k79" > "$OUT/k79.log" 2>&1; el k79 $?
grep -hE "^\| mhc|met on" "$R"/k79/kernels_*.md | cut -d'|' -f2-5,8,11,13,14,17
elif [ "$PART" = 59 ]; then
# session 40: an H200 at last, with little device time left (part 4, the whole table, needs about
# 10 minutes): first the rows only an H200 can settle (compress and RoPE + quant at 4,096 rows,
# flash inverse RoPE at 64 rows), then the gate's and mHC's rows; each its own table file
for ops in compress,rope_quant,inv_rope gate,mhc; do
  timeout 240 python benchmarks/kernels.py --ops $ops --out "$R/k59" > "$OUT/k59_$ops.log" 2>&1; el k59_$ops $?
  grep -hE "^\| |met on" "$R"/k59/kernels_*${ops//,/*}*.md 2>/dev/null | cut -d'|' -f2-5,8,11,13,14,17
done
elif [ "$PART" = 46 ]; then
# after session 31: ncu put the top-k id load first in decode attention's stalls
# (ncu_h100_session31.md); the 1- and 8-query rows (split sources, retiled) against their twins
# with the ids a tile ahead and with the ids prefetched, twice; then flash's 64-head rows on
# 64-key tiles with split sources (part 40 ran them without). Static sm_90 (Triton 3.6, mid's 16
# heads, bf16): the 1- / 8-query rows 214 / 250 registers, with ids ahead 250 / 254, prefetched
# 174 / 214, no stack in any
for run in 1 2; do
  timeout 120 python benchmarks/attention_tiles.py --scales mid flash --layouts engine ring ring_packed --t 1 8 --twins ids_ahead prefetch_ids --out "$R/ia_dec$run" > "$OUT/ia_dec$run.log" 2>&1; el ia_dec$run $?
  grep -hE "^- (mid|flash) T=" "$R"/ia_dec$run/*.md | cut -c1-400
done
timeout 100 python benchmarks/attention_tiles.py --scales flash --layouts engine --t 64 512 --block-h 64 --block-n 32 64 --warps 8 --stages 2 --splits 16 --programs 128 --prefetch-ids 0 1 --split-sources 1 --out "$R/n64ss" > "$OUT/n64ss.log" 2>&1; el n64ss $?
grep -hE "^- flash T=" "$R"/n64ss/*.md | cut -c1-400
elif [ "$PART" = 42 ]; then
# session 29: where decode attention's time goes (flash 8 queries: 19 us for 6.9 MB and 0.7
# GFLOP; a decode batch of 64 requests on bf16 and on packed ring caches at mid): ncu's stall
# samples per source line, as part 35 did for prefill (run after 41's flip, if any); and one query
# of one request against one request of a batch (the same keys: 9.6 vs 13.0 us in the table)
ncu_lines dec_src 300 8 attention:flash:8 attention_ring:mid:64 attention_packed:mid:64 attention:mid:1 attention_ring:mid:1
elif [ "$PART" = 37 ]; then
# the gate's tilings at 16-64 rows at both scales (part 34: 64 experts per program won at flash, 64 rows)
timeout 300 python benchmarks/gate_tiles.py --sweep --scales mid,flash --rows 16,32,64 --out "$R/gate_e" > "$OUT/gate_e.log" 2>&1; el gate_e $?
for t in 16 32 64; do for sc in mid flash; do grep -hE "^\| $sc \| $t " "$R"/gate_e/*.md | sort -t'|' -k8 -n | head -4 | cut -c1-160; grep -hE "^\| $sc \| $t \| new " "$R"/gate_e/*.md | cut -c1-160; done; done
elif [ "$PART" = 4 ]; then
# (session 28: the table also reads the GPU's own copy and matrix ceilings: "own roofline";
# their timer checked against triton's do_bench first)
timeout 40 python -m pytest -q -p no:cacheprovider --tb=line tests/benchmarks/test_ceilings.py -m gpu > "$OUT/ceil.log" 2>&1; el ceil $?
grep -E "^(FAILED|ERROR)|passed|failed|^E " "$OUT/ceil.log" | tail -4
timeout 545 python benchmarks/kernels.py --out "$R/kern" > "$OUT/kern.log" 2>&1; el kern $?
grep -E "^\||met on|own measured" "$R"/kern/kernels_*.md | tail -92
else
timeout 150 python benchmarks/attention_tiles.py --layouts ring_packed --t 1 8 64 128 --block-h 16 32 --block-n 16 --warps 4 --stages 3 --splits 16 --merge-d 0 256 --programs 0 256 --out "$R/attpk" > "$OUT/attpk.log" 2>&1; el attpk $?
grep -E "table .* best" "$OUT/attpk.log"
timeout 200 python benchmarks/decode.py --paths graphs --kernels fused --kv-storage dequantized packed --batches 1 64 --context 1024 --steps 8 --rounds 3 --out "$R/decpk" > "$OUT/decpk.log" 2>&1; el decpk $?
grep -E "^\|" "$OUT/decpk.log" | tail -6
timeout 120 ncu --clock-control none --profile-from-start off --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats -o "$R/prof" python benchmarks/profile_ops.py attention:flash:8 attention:flash:512 gate:flash:64 rope_quant:mid:4096:nvfp4 > "$OUT/ncu.log" 2>&1; el ncu $?
ncu -i "$R/prof.ncu-rep" --page details 2>/dev/null | grep -E "_kernel|Duration|Registers Per|Achieved Occupancy|Warp Cycles Per Issued" | head -60
fi
done
