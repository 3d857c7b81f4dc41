"""How the fused Mega-Gate (``runtime/kernels/gate.py``) tiles a call: rows x experts x D.

Why a policy at all: the gate GEMM is [T, D] x [D, E]. At decode T is 1-64, so one program
per 16 rows over all experts and all of D (the first kernel) left one or a few SMs reading
the whole weight alone: 91-94 us at ``flash`` (3.9 MB of bf16 weight) and 10 us at ``mid``
(benchmarks/results/kernels_h200.md), where the issue-16 goal is about two empty launches.
Here the grid is (row blocks, expert blocks x D splits) sized to keep about ``programs``
programs in flight; every program writes its [BLOCK_M, BLOCK_E] float32 partial logits and
the last program of each row block (an atomic ticket) sums the D splits in split order and
selects the top-k for those rows.

Limits on the split, and why:
- the tail program reads ``splits x rows x E x 4`` bytes of partials alone, so a split
  that would make it read more than ``tail_bytes`` is not taken (at ``flash`` with 16
  rows one split is 25 KB through one SM);
- at most ``max_splits`` (16) splits: the program that sums them loads and adds one
  partial per split, and at ``mid`` (2 expert blocks) reaching the program target took 64
  splits of 32 columns: 5.33 / 7.24 us at 1 / 8 rows, against 4.66 / 4.54 us with 16
  splits of 128 columns and 32 programs (benchmarks/results/gate_tiles_h200_sweep_mid.md);
- a D split never goes below one ``block_d`` chunk.

The selection in that last program is serial: k rounds of reductions over its rows x
padded experts. On the H200 it grew the ``flash`` gate from 7.8 us at one row to 15.8 at 8
and 29.8 at 64 (benchmarks/results/gate_tiles_h200.md; about 1.3 us per row), so once a
row block's selection would cover more than ``select_from`` (row, expert) pairs the call
takes two launches: partials, then ``select_rows`` rows per program of a second grid
(``GateTiling.select_rows``); the tail budget then bounds what one of those reads.
Measured (benchmarks/results/gate_tiles_h200_select*.md, same run, one launch -> two):
``flash`` 8 rows 15.0 -> 8.6 us, 64 rows 31.5 -> 12.9, 512 rows 103 -> 15.4, 4,096 rows
183 -> 62; ``mid`` (32 experts) 512 rows 8.3 -> 6.4 but 4,096 rows 10.6 -> 11.8.

That selecting launch's warps go by the size of one program's selection: ``select_rows`` x
padded experts over 256 pairs per warp, at most ``num_warps`` (``mid``: 2 x 32 -> one warp,
whose reductions stay in its lanes with no shared memory or barrier; ``flash``: 2 x 512 ->
four). Measured (gate_tiles_h200_stages_mid_flash.md, one run; 4 warps -> 1): ``mid`` 512
rows 6.64 -> 6.16 us, 4,096 rows 13.26 -> 9.21, so ``mid`` now selects in a second launch
from 512 rows too (one launch there: 9.02 / 11.15 us); at ``flash`` one warp lost
everywhere (1 row 9.34 -> 12.07 us, 512 rows 16.38 -> 19.55) and two lost from 1 to 512
rows (4,096: 62.16 -> 59.52). ``select_from`` = 1,024 (was 2,048) takes ``mid``'s 64-row
blocks and ``flash`` from 3 rows to two launches (``flash`` 4 rows 11.22 -> 9.68 us; 2
rows stay at one: 8.94 vs 9.91); ``mid``'s decode blocks of 16 rows stay at one launch,
which won at 1-64 rows (e.g. 1 row 3.95 vs 5.32 us with the second launch on one warp).
Since session 43 every call selects in a second launch (``GatePolicy.select_from`` = 0: with
the dependent launch the second launch's start overlaps the partials', and read in turn it
won at ``mid`` decode too), ``flash`` (512 padded experts) one row per program
(``GatePolicy.wide_select_from``; both have the timings). ``flash``'s selecting launch is
still 3.3-3.8 us of the 6.4-9.3-us ``flash`` gate at decode on an H100, a serial chain of
about 950 warp instructions at one row (ncu_h100_session43_gate_select.md). Selecting in
groups first (each group's top-k within its lanes, then the top-k of the candidates; the
same picks bit for bit) kept its 21 barriers in the static sm_90 code, since the candidates'
rounds still cross warps, added 230-730 instructions, and was slower in every case (one row
6.37 -> 6.88 us with 4 groups; gate_tiles_h100_session43_groups_1.md, session 43's commit
08f7850 has the code); 8 warps lost too. Not kept.

The rounds as one bitonic top-k of the keys (``tl.topk``) and a gather of the picked scores
lost in 8 of 10 cases on the H200 (``mid`` one row 4.13 -> 5.07 us, ``flash`` 4,096 rows 61.96
-> 72.61; benchmarks/results/gate_tiles_h200_sort_select.md), so the rounds stay.

With one expert block and one split the kernel keeps the logits in registers and selects
at once (no scratch, no ticket): the first kernel's tiling, ``GatePolicy(one_program=True)``.

Summing the splits without a ticket would need a reduction across SMs through a
thread-block cluster's distributed shared memory (``num_ctas > 1``). Triton 3.6 (the GPU
machine's) compiles none for sm_90: with 2 or 4 CTAs a program, mid's [32, 2048] -> [32]
score sum fails in ``ConvertTritonGPUToLLVM`` and a max to one value in
``TritonGPUPlanCTAPass``; Triton 3.9 compiles both but lays the tile over the CTAs by
experts, so only the max crosses them (benchmarks/results/cluster_probe_sm90.md, static,
session 37). So the ticket stays.

Pure arithmetic on ints, so the policy is tested without running a kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from runtime.kernels.backend import cdiv, next_pow2


@dataclass(frozen=True)
class GateTiling:
    """One call's tiles. ``split_d``: D columns per program (a multiple of ``block_d``);
    ``sel_m``: rows the selecting program handles at once (``block_m`` when the logits stay
    in registers); ``e_pad``: experts padded to a power of two for the selection."""

    block_m: int
    block_e: int
    block_d: int
    split_d: int
    sel_m: int
    e_pad: int
    num_warps: int = 4
    select_rows: int = 0  # > 0: a second launch selects, this many rows per program (= sel_m)
    num_stages: int = 0  # software-pipelined stages of the D loop's loads (0: Triton's default, 3 on sm_90)
    select_warps: int = 0  # warps of the selecting launch's programs (0: num_warps; set with select_rows)
    pair_reduce: bool = False  # each selection round one reduction of (key, score) pairs (GatePolicy.pair_from)

    def splits(self, d: int) -> int:
        return cdiv(d, self.split_d)

    def e_blocks(self, e: int) -> int:
        return cdiv(e, self.block_e)

    def grid(self, t: int, d: int, e: int) -> tuple[int, int]:
        return cdiv(t, self.block_m), self.e_blocks(e) * self.splits(d)

    def select_grid(self, t: int) -> int:
        """Programs of the selecting launch (``select_rows`` > 0)."""
        return cdiv(t, self.select_rows)

    def one_program(self, d: int, e: int) -> bool:
        """True when a row block is one program: logits in registers, no ticket."""
        return self.e_blocks(e) == 1 and self.splits(d) == 1


@dataclass(frozen=True)
class GatePolicy:
    """Chooses a :class:`GateTiling` per call from (T, D, E).

    ``programs``: programs to aim for (about two per SM of an H200, 132 SMs);
    ``tail_bytes``: most partial-logit bytes one selecting program may read;
    ``block_d`` / ``block_e``: 0 = by row count (decode, T <= 64: 16 rows x 16 experts and
    the widest D chunk that still gives ``programs / 2``, so each program reads a small
    share of the weight in few loads and the weight is read from HBM once; more rows:
    64 x 64 tiles x 64, so x and the weight are re-read from L2 fewer times);
    ``wide_experts_from``: from this many padded experts, decode calls of at least
    ``wide_experts_rows`` rows take 32 experts per program up to 32 rows and 64 above
    (``decode_block_e``): each expert block re-reads the rows' x, which at ``flash`` (384
    experts, 24 blocks of 16) and 64 rows is 24 x 64 x 5,120 x 2 bytes, as much as the
    weight itself. Measured (H200,
    gate_tiles_h200_sweep_rows_16_64_1.md and gate_tiles_h200_sweep_rows_16_64_flash_2.md, two
    runs, default -> rule):
    ``flash`` 32 rows 9.92 -> 9.35 and 9.04 -> 8.47 us (d256 e32), 64 rows 13.16 -> 9.25
    and 12.58 -> 9.89 (d256 e64; H100, gate_tiles_h100_sweep_flash_64.md: 11.81 -> 9.15);
    at 16 rows 32 experts won one run and lost the other (9.15 -> 8.29, 7.57 -> 7.64), so
    16 rows kept 16 until session 41: on the H100 (gate_tiles_h100_session41_flash.md,
    four runs; at 8 rows session 38 a fifth, 8.35 -> 7.66) 32 experts per program won at 8
    rows (8.72 / 8.11 / 8.05 / 8.11 -> 8.39 / 7.70 / 7.69 / 7.67 us) and 16 rows (8.19 /
    8.25 / 8.25 / 8.17 -> 7.77 / 7.73 / 7.69 / 7.65) in every run, and lost at one row
    (7.31 / 7.14 / 7.12 / 7.11 -> 7.38 / 7.26 / 7.25 / 7.26), so from ``wide_experts_rows``
    = 8 rows (the H200's 8 rows not timed on this kernel; a second H100 session agreed, 8 /
    16 rows 8.19 / 8.26 -> 7.66 / 7.72 us: gate_tiles_h100_session42_flash.md). ``mid`` (32
    experts) stays at 16 per program: it is launch-bound (0.2-0.4 MB), and one run had 16
    experts fastest at 16 rows (4.74 us against 5.05);
    ``one_program``: the first kernel's tiling (one program per 16 rows, all experts,
    all of D), kept to measure against (benchmarks/gate_tiles.py);
    ``select_from`` / ``select_rows``: a second launch selects, ``select_rows`` rows per
    program, when a row block's ticket-holder would select over more (row, padded expert)
    pairs than ``select_from``. 0 since session 43: every call selects in a second launch
    (the ticket-holder's selection stays for policies that ask for it). Before, 1,024 kept
    ``mid``'s decode calls (16-row blocks of 32 experts) in one launch; with the variants of
    a case read in turn on an H100 (gate_tiles_h100_session43_mid_select_{1,2}.md, two runs,
    one launch -> two, us) 1 row 4.23 / 4.18 -> 3.72 / 3.68, 16 rows 4.96 / 4.99 -> 4.47 /
    4.51, 32 rows 5.11 / 5.05 -> 4.55 / 4.52, 64 rows 5.48 / 5.46 -> 5.21 / 5.27; at 2-8
    rows faster in the second run (4.66 / 4.62 / 4.60 -> 4.40 / 4.37 / 4.46) and within 0.1
    us either way in the first (5.11 / 5.08 / 5.09 -> 5.14 / 5.04 / 5.18). Session 41's four
    sequential runs had had one launch ahead at one row (3.90-4.03 against 4.24-4.78 us):
    read one after another, the two orders of the same variants disagreed;
    ``wide_select_from``: from this many padded experts (``flash``: 384 -> 512) every call
    selects in a second launch, one row per program, on ``selecting_warps`` (2 warps for
    one row's 512 pairs; a call of one row on ``num_warps``). Why: with 2 rows per program
    on 4 warps each of the k rounds crosses the warps through shared memory and a barrier,
    and at one row the ticket-holder's tail selected in the partials' launch. Measured on an
    H100 (session 43, the variants of a case replayed in turn, two runs,
    gate_tiles_h100_session43_select_rows_{1,2}.md; before -> rule, us): 1 row 7.28 / 7.30
    -> 6.36 / 6.37 (on 2 warps 7.14 / 7.16), 2 rows 7.82 / 7.79 -> 7.52 / 7.49, 4 rows 7.87 /
    7.91 -> 7.52 / 7.59, 8 rows 7.58 / 7.56 -> 7.21 / 7.23, 16 rows 7.56 / 7.61 -> 7.22 /
    7.28, 32 rows 8.54 / 8.54 -> 8.11 / 8.11, 4,096 rows 65.08 / 64.83 -> 62.04 / 61.82;
    slower at 64 rows (9.23 / 9.19 -> 9.34 / 9.32) and 512 (15.81 / 15.07 -> 16.00 /
    15.17), where one row on 4 warps tied or won (9.22 / 9.21, 15.60 / 14.80) but lost at
    2-32 rows and 4,096 (66.60 / 66.62): one rule, not one per row count. The H200 has not
    timed it. ``mid`` (32 experts) keeps 2 rows per selecting program (one row lost there at
    4,096 rows: gate_tiles_h100_session43_select_warps_mid_1.md);
    ``max_splits``: most D splits per row block (the module docstring says why);
    ``block_m``: rows per program (0: by row count, 16 with ``one_program``); ``num_stages``:
    the D loop's pipelined stages (0: Triton's default). Both are sweep options, untimed
    (benchmarks/gate_tiles.py ``--stages``): at 4,096 ``mid`` rows every tiling of the grid
    stayed at 27-41 % of the roofline (gate_tiles_h200_sweep_mid_4096.md) with at most two
    of a program's 8 KB x tiles in flight. ``select_warps``: warps of the selecting launch's
    programs (0: by the selection's size, the module docstring says how and why).
    ``pair_from``: from this many padded experts each selection round is one reduction of
    (key, score) pairs, keeping the larger key's pair, instead of a max of the keys and then
    a masked sum that gathers the winner's score: the same picks and weights bit for bit
    (keys are unique within a row), one reduction tree per round on the serial chain
    instead of two. Where a row's experts span warps each tree crosses them through shared
    memory and a barrier (static sm_90 under Triton 3.6, ``flash``: barriers 47 -> 29 in the
    one-launch form, 39 -> 21 in the selecting launch). Measured (H200, three runs each,
    gate_tiles_h200_paired.md, medians, max and sum -> pairs): ``flash`` 1 row 8.16 -> 7.68
    us, 3 rows 9.13 -> 8.43, 8 rows 9.27 -> 8.55, 64 rows 13.34 -> 13.05, 512 rows 15.76 ->
    15.47, 4,096 rows 62.28 -> 61.71 (each 3 of 3 runs); ``mid`` (32 experts, one warp's
    lanes) one row 3.96 -> 4.74 (0 of 3) and within 0.15 us from 3 rows on: so 256.
    ``dependent_select``: the selecting launch is launched dependent on the partials'
    (Hopper's programmatic dependent launch, runtime/kernels/pdl.py; CUDA only), so its
    launch overlaps theirs. On: dependent_launch_h200.md, ``flash`` 8 / 64 rows (two
    launches) 9.11 -> 8.24 and 13.53 -> 13.33 us; the four one-launch calls (``mid`` 1 / 8 /
    64 rows, ``flash`` 1) 0.01-0.37 us faster; the same bits.
    """

    programs: int = 256
    tail_bytes: int = 64 * 1024
    block_d: int = 0
    block_e: int = 0
    num_warps: int = 4
    one_program: bool = False
    select_from: int = 0
    select_rows: int = 2
    wide_select_from: int = 512
    max_splits: int = 16
    block_m: int = 0
    num_stages: int = 0
    select_warps: int = 0
    pair_from: int = 256
    dependent_select: bool = True
    wide_experts_from: int = 256
    wide_experts_rows: int = 8

    def __post_init__(self) -> None:
        if self.block_m < 0 or self.block_m & (self.block_m - 1) or 0 < self.block_m < 16:
            raise ValueError(f"GatePolicy.block_m: expected 0 or a power of two >= 16, got {self.block_m}")
        if self.select_warps not in (0, 1, 2, 4, 8):
            raise ValueError(f"GatePolicy.select_warps: expected 0 (by size), 1, 2, 4 or 8, got {self.select_warps}")
        if self.wide_experts_rows < 1:
            raise ValueError(f"GatePolicy.wide_experts_rows: expected a row count >= 1, got {self.wide_experts_rows}")
        if self.num_stages < 0:
            raise ValueError(f"GatePolicy.num_stages: expected >= 0 (0 = Triton's default), got {self.num_stages}")

    def tiling(self, t: int, d: int, e: int) -> GateTiling:
        tiles = self.shape_tiling(t, d, e)
        return replace(tiles, pair_reduce=True) if tiles.e_pad >= self.pair_from else tiles

    def shape_tiling(self, t: int, d: int, e: int) -> GateTiling:
        """The tiles of a (T, D, E) call: everything :meth:`tiling` sets but how it selects."""
        e_pad = max(16, next_pow2(e))
        if self.one_program:
            block_d = self.block_d or (64 if e_pad <= 128 else 32)
            block_m = self.block_m or 16
            return GateTiling(block_m, e_pad, block_d, cdiv(d, block_d) * block_d, block_m, e_pad, self.num_warps,
                              num_stages=self.num_stages)
        decode = t <= 64
        block_m = self.block_m or (16 if decode else 64)
        block_e = min(e_pad, self.block_e or (self.decode_block_e(t, e_pad) if decode else 64))
        row_blocks, e_blocks = cdiv(t, block_m), cdiv(e, block_e)
        block_d = self.block_d or (self.decode_block_d(row_blocks * e_blocks, d) if decode else 64)
        chunks = cdiv(d, block_d)
        rows = max(1, min(t, block_m))
        # a second launch selects when the ticket-holder's selection would be long, or the
        # experts are wide, unless the tiling is one program per row block (it selects from
        # its registers)
        wide_select = e_pad >= self.wide_select_from
        select_rows = 1 if wide_select else self.select_rows
        long_selection = wide_select or rows * e_pad > self.select_from
        read_rows = select_rows if long_selection else rows  # rows whose partials one selecting program reads
        most = max(1, min(chunks, self.tail_bytes // (read_rows * e * 4)))
        splits = max(1, min(most, cdiv(self.programs, row_blocks * e_blocks), self.max_splits))
        per_split = cdiv(chunks, splits)
        one_program = e_blocks == 1 and cdiv(chunks, per_split) == 1
        if long_selection and not one_program:
            return GateTiling(block_m, block_e, block_d, per_split * block_d, select_rows, e_pad,
                              self.num_warps, select_rows, self.num_stages, self.selecting_warps(e_pad, select_rows, t))
        if one_program:
            sel_m = block_m  # one program per row block: selects from its registers
        else:
            sel_m = min(block_m, max(2, next_pow2(t)), max(2, 4096 // e_pad))
        return GateTiling(block_m, block_e, block_d, per_split * block_d, sel_m, e_pad, self.num_warps,
                          num_stages=self.num_stages)

    def selecting_warps(self, e_pad: int, rows: int | None = None, t: int | None = None) -> int:
        """Warps of a selecting launch's programs: ``select_warps``, or one per 256 of the
        ``rows`` (default ``select_rows``) x ``e_pad`` pairs a program selects over (at
        least one, at most ``num_warps``); a call of ``t`` = 1 row over wide experts
        (``wide_select_from``): ``num_warps`` (the class docstring has the timings)."""
        if self.select_warps:
            return self.select_warps
        if t == 1 and e_pad >= self.wide_select_from:
            return self.num_warps
        return max(1, min(self.num_warps, (self.select_rows if rows is None else rows) * e_pad // 256))

    def decode_block_e(self, t: int, e_pad: int) -> int:
        """Experts per program of a decode call (T <= 64): 16, or with at least
        ``wide_experts_from`` padded experts and at least ``wide_experts_rows`` rows, 32 up
        to 32 rows and 64 above (the class docstring has the timings)."""
        if e_pad < self.wide_experts_from or t < self.wide_experts_rows:
            return 16
        return 32 if t <= 32 else 64

    def decode_block_d(self, tiles: int, d: int) -> int:
        """The widest D chunk (256 .. 32) at which ``tiles`` (row x expert blocks) times
        the chunks of D, at most ``max_splits`` of them, reach half the program target:
        ``flash`` (24 expert blocks) gets 256. Where none does, the narrowest chunk that
        still covers D in ``max_splits``: ``mid`` (2 expert blocks) gets 128, 16 splits."""
        for block_d in (256, 128, 64, 32):
            if tiles * min(cdiv(d, block_d), self.max_splits) >= self.programs // 2:
                return block_d
        return next(b for b in (32, 64, 128, 256) if cdiv(d, b) <= self.max_splits or b == 256)
