"""How the fused mHC site (``runtime/kernels/mhc.py``) tiles a call, and how it forms the 24
projections.

Why a policy: a site reads the streams X [T, 4, D] once and does little arithmetic per
byte, so it is memory-bound at every row count, yet it measured 6 % of the H200's roofline
from 512 to 4,096 rows (benchmarks/results/kernels_h200.md): one program per 16-row block
over all of D kept about two programs per SM, with a few KB of loads in flight each. Here
the D range is split until about ``programs`` programs are in flight at every row count;
each program writes per-split partials, and the site is finished (the sums over the
splits, the coefficients, the normalised rows) in one of two ways:

- "tail" (many rows): the row block's last program, found by a ticket, finishes it in the
  same launch, normalising its rows while they are still in L2;
- a second launch (decode rows): one program per (row block, split) normalises its D
  range, and one more program per row block computes the coefficients. At decode the
  ticket's serial tail cost more than the launch (benchmarks/results/tile_sweep_h200_mhc_2.md,
  benchmarks/results/tile_sweep_h200_mhc_3.md; again with session 15's kernel, ``mid`` one
  row 8.47 vs 6.86 us: tile_sweep_h200_decode_sweep.md), and so did the tail from 256 or
  512 rows (``mid`` 512 rows 55.8 vs 25.3 us, same file).

The coefficients' own program: when split 0 computed the coefficients and then normalised
its range, it set the finishing launch's length. With its own program (first in the grid)
the finish went, on the H200 (tile_sweep_h200_decode_finish.md, per launch): ``mid`` one
row 4.55 -> 3.94 us, 8 rows 4.79 -> 4.23, 512 rows 9.12 -> 8.39; ``flash`` one row 5.00 ->
4.56, 512 rows 12.42 -> 9.70. At 2-8 ``flash`` rows it went the other way (5.00 -> 6.13
and 5.34 -> 6.35 us), placed first or last alike (tile_sweep_h200_finish_last.md). The
cause, found by compiling with the H200's Triton 3.6 on a CPU: with the split count as
``num_programs - 1`` the compiler issued 10 of the coefficient program's 52 partial loads
before its first add (80 registers) instead of 48 (168); bounded below by 1 it compiles
as before (runtime/kernels/mhc.py). That form is not yet timed on the H200.

Before, every finishing program computed every coefficient from all the splits' partials:
97 us at ``flash`` with 64 rows (160 splits) for 8.5 MB of site
(benchmarks/results/tile_sweep_h200_mhc_1.md, the kernel breakdown).

The projections (``projection``), [T, 4D] x [4D, 24] with a float32 ``fn``:

- "fma": multiply-adds on the CUDA cores without ``tl.dot``, so a program may hold fewer
  than 16 rows (one decode row does not pay for 15 masked ones). At most ``FMA_ROWS``:
  Triton rewrites a broadcast multiply summed over D with 16 rows into a TF32 ``tl.dot``
  (measured 5.5e-4 off in the coefficients on the H200:
  benchmarks/results/mhc_precision_h200_first.md). One row is 2-D [BLOCK_D, 32] products
  (runtime/kernels/mhc.py says why): the sweeping launch 3.40 -> 1.86 us at ``mid``, 3.59 ->
  2.03 at ``flash`` (tile_sweep_h200_decode_sweep.md);
- "tf32x3": ``tl.dot`` as three TF32 tensor-core products: the closest to a float64 oracle
  of every mode, 8.5e-7 (benchmarks/results/mhc_precision_h200.md). It had measured 1.1e-4 off
  after the previous site's mixing, and so had a bf16 tensor-core form, while the FMA form
  was not (mhc_precision_h200_first.md): with FMA contraction switched off in the kernel all
  are within 5e-6. The likely cause: Triton computes X' twice (the stored copy, and the
  tensor-core operand's in its own layout), and contracted differently the two copies
  rounded to different bf16 values;
- "ieee": ``tl.dot`` in float32 on the CUDA cores (Triton's FMA lowering): 2.5-3.8x slower
  than "tf32x3" from 512 rows up (tile_sweep_h200_mhc_2.md); the interpreter's mode (it
  computes float32 whatever the request).

- "tf32x2": X' is bf16, so exact in TF32; fn as its TF32 head plus remainder, both rounded
  to nearest on the host (``runtime.kernels.mhc.tf32_split``), two TF32 products instead of
  three, and no operand split in the kernel (float32 streams fall back to "tf32x3": their
  X' is not exact in TF32). Not the default until session 43 (at 8-16 decode rows until
  session 44, below): 6.1e-6 from the float64 oracle against 5.0e-7
  for "tf32x3" (mhc_precision_h200_pin.md), as the first form (head truncated to fn's top 19
  bits, split in the kernel: 6.6e-6, mhc_precision_h200_reload.md), so the rounding of the
  split was not the cause; and slower than "tf32x3" in every case but the ``flash`` tail
  with 32-column tiles (tile_sweep_h200_mhc_pin.md: e.g. mid 512 rows 37.4 vs 25.1 us,
  decode 2x). The cause (session 21, on the CPU): those dots accumulated into the running
  sum (``m = dot(x, f, m)``), one float32 rounding per product against the sum over all of
  D, where Triton's tf32x3 ``dot`` sums a tile's products from zero and then adds the tile:
  an emulation of the two orders gives 4.6e-6 and 7.7e-7
  (benchmarks/results/tf32_accumulation_cpu.md). "tf32x2" now sums each stream's tile
  (remainder, then head) from zero and adds it, the four streams' chains independent as in
  tf32x3 (before: one chain of eight dependent dots per tile). Since then it measured as
  close to the oracle as "tf32x3" (4.1e-7 / 8.0e-7 / 3.9e-7 against 5.0e-7 / 8.6e-7 / 4.1e-7,
  mhc_precision_h200_fma_mix.md) and stayed slower: on the H200 with fn split on every call
  (tile_sweep_h200_mhc_fma_mix_*.md: ``mid`` 4,096 rows 159.7 vs 131.6 us), and on an H100
  with fn's split kept per weight (runtime/kernels/mhc.py, ``Tf32Splits``;
  tile_sweep_h100_session42_mhc.md: ``mid`` 512 rows 21.9 -> 26.6-27.2 us, 4,096 rows
  133.3 -> 143.9-144.6, ``flash`` 64 rows 15.1 -> 18.3-19.1; a tie at 16 rows). The time is
  in the sweep kernel, although its 4,096-row loop is 732 static sm_90 instructions (168
  registers) against 1,344 (250); it asks 51 KB of shared memory against 30 KB and reads
  fn's remainder from L2 beside its head. At decode (8-16 rows) it is faster, read in turn
  (session 43), and was the default there until "bf16x3" (below) took those rows in session
  44 (``MhcPolicy.decode_tf32x2_from``, ``decode_bf16x3_from``).

The re-read (``reload_d``): the sweep mixes and writes ``reload_d`` columns of X', then
projects them from memory (runtime/kernels/mhc.py says why). Without the pin (below) it
made decode and mid-size calls 4-28 % faster and the tail 5-10 % slower
(tile_sweep_h200_mhc_reload.md). With the mixing pinned the projection in the mixing loop
is faster at every row count, so nothing re-reads by default (``reload_d`` = 0;
tile_sweep_h200_mhc_pin.md: 8 rows mid 11.07 -> 10.10 us, flash 11.76 -> 10.77; 512 rows
mid 26.7 -> 25.1, flash 57.7 -> 45.7).

The finish's coefficients (``finish_registers``): on [rows, 4, 4] tensors every one of the
Sinkhorn's 40 normalisations is a reduction across lanes, a serial chain that at decode
took longer than the sweep (6.5 vs 5.0 us at ``mid``, one row:
benchmarks/results/ncu_h200_attention_gate_mhc.md). With one [rows] vector per
coefficient it is register arithmetic (no shuffles in its Sinkhorn loop). Static sm_90
resources (benchmarks/results/sass_static_sm90.md): the 8-row finish at 8 rows holds 255
registers and 16 bytes of stack, one row per program (``decode_finish_rows``) 64 at
``mid``. On the H200 (benchmarks/results/tile_sweep_h200_mhc_finish.md) one row per
program is the default: 8 rows mid 11.9 -> 11.1 us, flash 15.6 -> 12.1; 2 rows mid 8.8 ->
8.8, flash 10.0 -> 9.3; 1 row the same program either way (mid 8.45 / 8.43, flash 9.71 /
9.98, within the run's noise). The register coefficients were slower at every row count
(mid 1 row 9.5 vs 8.5 us, 8 rows 14.3 vs 11.9; 64 rows 20.1 vs 16.7): the serial chain is
the longer loop body, not the shuffles, so they stay off. Since session 15 the register
form loads the partials as the tensor form does and splits the 16 entries out of the
[rows, 4, 4] tensor (``tl.split``) instead of 24 loads and reductions of their own: at 1,024
rows it measured 61.2 vs 65.4 us (``mid``) and 120.7 vs 123.1 (``flash``), at one row
slower (``mid`` 7.22 vs 6.86: tile_sweep_h200_decode_sweep.md, one run); still off.

Why both forms had the same serial chain: 19 Sinkhorn iterations cost about 2 us at decode
in either (20 vs 1 iterations, tile_sweep_h200_finish_steps.md), and every reciprocal went
through div.full's range checks (two compares and predicated rescaling ahead of it in the
sm_90 code). With each sum taken as pairs of pairs and the reciprocal as
``rcp.approx.ftz.f32`` (``fast_reciprocal``, CUDA only: the same value for 1.0 / x in the
normal range, and the sums are at least hc_eps) the register form's iteration went from 131
to 73 instructions and its 19 iterations to 1.2-1.4 us, so it is the decode default
(``decode_finish_registers``): the finishing launch at ``mid`` one row 3.77 -> 3.67 us
against the tensor form and 4.48 -> 3.67 against b2eb990's kernel, 8 rows 4.57 -> 3.69;
``flash`` one row 4.88 -> 4.05, 8 rows 5.45 -> 4.28 (the site 6.91 -> 6.13, 10.64 -> 9.62,
8.03 -> 7.77, 11.62 -> 10.29 us). Above decode, with 8 rows per program, it lost at 64
rows: 12.4 vs 9.7 us (``mid``) and 15.2 vs 12.4 (``flash``) per finishing launch.

Above decode (session 18, benchmarks/results/tile_sweep_h200_finish_rows.md and
tile_sweep_h200_decode_finish_to.md, whole site, ``mid`` / ``flash``): the decode finish
(one row per program, one warp, the register coefficients) up to ``decode_finish_to`` =
256 rows, against 8-row programs with the tensor coefficients before: 64 rows 14.63 /
21.11 -> 10.45 / 16.46 us, 128 rows 18.08 / 23.27 -> 14.41 / 20.10, 256 rows 17.95 /
26.10 -> 17.28 / 26.64 (a tie; 8-row programs with the register coefficients 21.28 /
29.82). From 512 rows 8-row programs stay, now with the register coefficients
(``finish_registers``): 512 rows 24.31 / 43.83 -> 23.36 / 42.42; in the ticket's tail 1,024
rows 64.18 / 122.94 -> 57.97 / 117.76, 4,096 rows 130.15 / 286.50 -> 131.26 / 287.85 (1.1 /
1.4 us slower, under 1 %, left so: one form everywhere). Decode's whole tiling up to 128
rows was faster at ``mid`` (64 / 128 rows 9.39 / 12.01 us) and slower at ``flash`` (18.44 /
24.51), so the sweep's tiles above decode stay.

Pinning the mixing (``pin_mix``, CUDA only: the interpreter has no inline PTX): with a dot
in the mixing loop Triton recomputed the whole mixing in the tensor-core operand's layout
(the reason for the re-read above). An identity the compiler may not duplicate, on X' as
rounded, makes it move X' into that layout instead: the sm_90 static count of the 4,096-row
tail's loop went from 1,929 to 1,523 instructions per iteration (ncu read the tail as
issue-bound: 255 registers, 8 warps per SM, an instruction every 2.7 cycles per warp,
ncu_h200_session14.md). On the H200 (tile_sweep_h200_mhc_pin.md) the tail at 4,096 rows:
mid 147.7 -> 131.9 us, flash 323.2 -> 289.2 us. The mixed streams and x are the same bits
either way; the coefficients moved in their last bits (the dot now takes X' as stored).

A bf16x3 mode (fn cut into three exact bf16 parts in the kernel, each a bf16 tensor-core
product) timed within 4 % of "tf32x3" (tile_sweep_h200_mhc_2.md) and was 3-4x further from
the oracle (mhc_precision_h200_first.md); it was not kept. Session 44's "bf16x3" projection
(``projection`` / ``decode_projection``; bf16 streams only: float32 ones take "tf32x3",
float16 ones "tf32x2", whose X' is exact in TF32) splits fn
once per weight on the host (runtime.kernels.mhc.bf16_split3) and sums each tile's three
products from zero, smallest part first, as "tf32x2" does: as close to the float64 oracle as
"tf32x3" (4.7e-7 / 7.8e-7 / 3.2e-7 against 5.0e-7 / 8.6e-7 / 4.1e-7,
mhc_precision_h100_session44.md). Static sm_90 under Triton 3.6 (mid 4,096 rows, the tail's
tiles): its sweep loop 690 instructions and 146 registers against 1,344 and 250; yet on an
H100 it was slower than the default in every case from 64 rows (``mid`` 4,096 rows 133.8 ->
155.6 us, ``flash`` 305.9 -> 364.9; tile_sweep_h100_session44_bf16x3_1.md), as "tf32x2"
was. Both read more bytes of fn per D tile than "tf32x3" (6 and 8 bytes per weight against
4), and in these tiles fn is the larger part of what a program loads (at 32 rows x 16
columns, 9 KB of fn parts against 5 KB of streams and output). Above decode it is not the
default; at 3-192 decode rows it is (``MhcPolicy.decode_bf16x3_from`` and ``decode_rows``:
8-16 in session 44).

A CUDA-core projection for many rows (session 36, compiled for sm_90 with Triton 3.6 on a
CPU, not kept): each stream's products accumulated with ``tl.fma`` into a [rows, D tile, 32]
float32 tensor through the sweep and summed over D once after it (no reduction in the loop,
so Triton does not rewrite it into a TF32 dot, and rows per program are not capped at
``FMA_ROWS``). At 4,096 ``mid`` rows its loop bodies took 14-16 warp instructions per (row,
column) position at every tiling that did not spill (16 x 8 tiles on 4 warps: 516
instructions per thread per iteration; 64 x 2 on 4 warps: 484, 168 registers; 32 x 8 on 8
warps: 506) against 5.25 for the default's TF32x3 dots (32 x 16 tiles on 2 warps: 1,344):
the 4 x 32 multiply-adds per position plus the shared-memory broadcasts of X' and ``fn``
cost more than the tensor cores' operand traffic.

Fused multiply-adds in the sweep (``fma_mix_from``, from 8 rows): the kernel is compiled without FMA
contraction (runtime/kernels/mhc.py's ``site_launches`` says why), so each of the mixing's
products and adds is its own instruction: in the sm_90 code of the 4,096-row ``mid`` tail
(Triton 3.6) 527 FMUL and 517 FADD of 3,264 instructions. ``tl.fma`` is never contracted
or split by the compiler, so a recomputed copy of X' would still round the same, and with
it the mixing takes 5 instructions per output instead of 9 (the collapse and the sum of
squares 4 instead of 7). The sums keep the reference's order; each product and add rounds
once, so X' can land one bf16 ulp away from the reference's where its float32 value sits
within an ulp of a rounding boundary, inside the parity tests' one-ulp bound.

Pure arithmetic on ints, so the policy is tested without running a kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from runtime.kernels.backend import cdiv, next_pow2

PROJECTIONS = ("ieee", "tf32x3", "tf32x2", "bf16x3", "fma")
DOT_ROWS = 16  # tl.dot's smallest row tile
FMA_ROWS = 8


@dataclass(frozen=True)
class MhcTiling:
    """One call's tiles: ``split_d`` D columns per sweeping program (a multiple of
    ``block_d``). Finishing reads ``chunk`` splits' partials at once for ``tail_t`` rows; with
    ``tail`` the last program of a row block finishes it (``tail_d`` columns at a time),
    otherwise a second launch of ``tail_t``-row programs with ``finish_warps`` warps.
    ``stages``: the sweeping launch's ``num_stages`` (0: Triton's default).
    ``bf16_operands``: "bf16x3" may hand the tensor cores bf16 operands (compiled on CUDA;
    Triton's interpreter runs a bf16 dot on the bits); read by that projection only, so a
    call falling back to another keeps it. ``coefficients_per_tile``: the sweep re-reads
    the previous sublayer's post and combination (20 floats a row) in every D tile
    instead of holding them through the loop (``MhcPolicy.coefficients_per_tile``).
    ``apart_t`` > 0: the sweep does not project; a launch of its own does, in ``apart_t`` x
    ``apart_d`` tiles on ``apart_warps`` warps, before the finishing launch
    (``MhcPolicy.apart_from``)."""

    projection: str
    block_t: int
    block_d: int
    split_d: int
    num_warps: int
    tail: bool
    tail_t: int
    tail_d: int
    chunk: int
    finish_warps: int
    reload_d: int = 0
    finish_registers: bool = False
    pin_mix: bool = False
    fast_reciprocal: bool = False
    fma_mix: bool = False
    bf16_operands: bool = False
    stages: int = 0
    coefficients_per_tile: bool = False
    apart_t: int = 0
    apart_d: int = 0
    apart_warps: int = 4

    @property
    def apart(self) -> bool:
        """Whether the projection has a launch of its own (``MhcPolicy.apart_from``)."""
        return self.apart_t > 0

    def splits(self, d: int) -> int:
        return cdiv(d, self.split_d)

    def grid(self, t: int, d: int) -> tuple[int, int]:
        return cdiv(t, self.block_t), self.splits(d)

    def project_grid(self, t: int, d: int) -> tuple[int, int]:
        """The projection's own launch (``apart``): ``apart_t`` rows per program, one
        program per split of the sweep, so its partials line up with the sweep's."""
        return cdiv(t, self.apart_t), self.splits(d)

    def finish_grid(self, t: int, d: int) -> tuple[int, int]:
        """The finishing launch: per ``tail_t`` rows, a program computing the coefficients
        and one per split normalising (runtime/kernels/mhc.py)."""
        return cdiv(t, self.tail_t), self.splits(d) + 1


@dataclass(frozen=True)
class MhcPolicy:
    """Chooses an :class:`MhcTiling` per call from (T, D) and whether it runs on CUDA.

    ``projection`` / ``decode_projection``: "" = "fma" up to ``fma_rows`` rows, else "tf32x3"
    on CUDA ("bf16x3" for decode calls of at least ``decode_bf16x3_from`` rows, else "tf32x2"
    from ``decode_tf32x2_from``), else "ieee"; ``decode_rows``: calls of at most this many
    rows use the ``decode_*`` tiles and projections (192 since session 46, with
    ``decode_stages`` 2: on an H100, against the tiles above decode, two runs each, faster
    at every count from 64 to 192 rows but ``flash`` 96, e.g. ``mid`` 128 rows 14.31 / 14.25
    -> 10.56 / 10.51 us, ``flash`` 144 rows 20.30 / 20.28 -> 16.64 / 16.62; ``flash`` 96
    rows 0.24-0.33 us slower in all four runs; from 208 to 256 rows slower in both runs at
    ``mid`` (0.06-1.2 us) and at ``flash`` but 224 rows (24.3 -> 20.0 us, both runs)
    (tile_sweep_h100_session46_decode_tiles_{64_256,80_192,96_240}_{1,2}.md).
    Against the rule before (48 rows, 3 stages), three runs: faster in 55 of 60 cases from 3
    to 192 rows, ``flash`` 96 rows slower in all three
    (tile_sweep_h100_session46_flipped_{1,2,3}.md). 48 in session 45: on an H100, 24 /
    32 / 48 rows, the decode tiles with "bf16x3" against the tiles above decode with
    "tf32x3", two runs each, us: ``mid`` 9.78 / 11.08 / 10.08 -> 7.48 / 8.27 / 8.43 and 9.74
    / 11.03 / 10.04 -> 7.44 / 8.20 / 8.39, ``flash`` 12.19 / 14.04 / 18.02 -> 11.76 / 11.95
    / 13.28 and 12.22 / 14.08 / 18.02 -> 11.80 / 11.97 / 13.32; at 64 rows a tie at ``mid``
    (10.28 -> 10.32) and slower at ``flash`` (15.03 -> 17.22):
    tile_sweep_h100_session45_decode_rows_{1,2}.md; 16 before). Confirmed after the flip on
    another machine start, three runs (tile_sweep_h100_session45_decode48_{1,2,3}.md; its
    GPU parity with 33 and 48 rows passed): faster at every ``mid`` row count from 17 and at
    ``flash`` from 24, but 0.3-0.6 us slower at ``flash`` 17-20 rows, where "tf32x3" on the
    decode tiles also beat "bf16x3" from 20 rows (neither split by hidden size yet);
    ``block_t`` 0 = as few rows as the projection allows (the row count rounded up to a
    power of two for "fma", 16 for a dot); ``programs``: split D until row blocks x splits
    reaches this; ``decode_programs``: the same for decode calls, at most ``programs`` (0: as
    ``programs``; so a policy that asks fewer ``programs``, as tests and sweeps do to split
    less, splits its decode calls less too). Why:
    the decode sweep (static sm_90, Triton 3.6: "bf16x3" on 16 x 64 tiles, 4 warps, 2
    stages) holds 128 registers and asks 66 KB of shared memory, so three programs an SM,
    396 on 132 SMs; at ``flash`` 512 programs split D into 80 tiles up to 96 rows (480
    programs at 96: a second wave of 84) and into 40 of 128 columns at 128-192 rows (320 /
    480). The H100 readings follow the waves (session 46): the decode tiles beat the tiles
    above decode at ``flash`` 64 and 128 rows (320 programs) by 1.2-3.2 us, lost at 96 (480)
    by 0.24-0.33, won at 192 (480) by 0.6 and at 80 / 160 (400: a second wave of four) by 0.6
    / 1.5; and above 192 rows, with ``decode_rows`` raised, lost at 208 (520) and 240 (405)
    but won at 224 by 4.2 us, the one count there whose 378 programs fit one wave
    (tile_sweep_h100_session46_decode_tiles_*.md). So 264 since session 47 (two programs an
    SM): ``flash`` 64 / 96 / 192 rows take 160 / 240 / 240 programs of two / two / four D
    tiles. On an H100, the variants read in turn, against 512 (the rule before) in three
    runs at 64-192 rows (tile_sweep_h100_session47_p264_{1,2,3}.md): ``flash`` 96 rows
    19.69 / 20.39 / 19.53 -> 13.84 / 14.60 / 13.81 us, 80 rows 17.01 / 17.17 -> 13.68 / 13.83,
    160 21.23 / 21.03 / 20.57 -> 19.28 / 18.99 / 18.60, 192 23.60 / 23.48 / 23.40 -> 20.07 /
    20.11 / 19.38, 64 13.92 / 14.12 / 13.93 -> 13.31 / 13.95 / 13.28; within 0.13 at 112 and
    128; at ``mid`` (32 D tiles) 192 rows 0.41-0.47 us faster in all three, but 144 rows
    0.46-0.54 slower in all three (16 splits of two tiles, 144 programs, against 32 of one),
    the other counts within 0.16 either way (96 rows once 0.6 faster). 396 was as fast at
    ``flash`` 96 and 176-192 rows but 1.9-3.4 us slower at 80 and 160 (the same runs, and
    tile_sweep_h100_session47_decode_programs_{1,2}.md against 512); 132 was faster than
    264 at ``mid`` 80-192 rows (0.05-0.37 us) and ``flash`` 64 (0.9), slower at every other
    ``flash`` count by up to 5.2 us, and 330 within 0.3 us of 264 at ``flash`` 80-192 rows,
    slower at 64, faster at ``mid`` 144 (tile_sweep_h100_session47_p264_targets_{1,2}.md).
    Below 64 rows 264 and 512 make the same grids (at most 3 row blocks, every D tile
    split); ``narrow_decode_programs``: the decode target instead for hidden sizes up to
    ``narrow_d`` (0: ``decode_programs`` at every size). Why 132 up to 2048 since session 48:
    ``mid``'s 32 D tiles split 80-192 rows into 80-132 programs of two or three tiles
    instead of 144-256 of one or two, and 132 beat 264 at every ``mid`` count from 80 to 192
    rows in three runs on two machine starts (0.05-0.37, 0.10-0.32 and 0.04-0.38 us; a tie at
    64 rows, where both split every tile; tile_sweep_h100_session47_p264_targets_{1,2}.md,
    tile_sweep_h100_session48_p264_targets_3.md), while at ``flash`` (80 tiles) it was
    slower at every count from 80 rows; sizes between 2048 and 5120 are untimed;
    ``split``: None = split as ``programs`` asks, False = one program per row block
    over all of D (the interpreter's default: there every program costs time, not
    parallelism); ``tail_rows``: calls of at least this many rows are
    finished by the ticket's tail and swept in ``tail_block_t`` x ``tail_block_d`` tiles,
    smaller ones finished by a second launch (``decode_finish_warps`` / ``finish_warps``) of
    programs of ``decode_finish_rows`` rows up to ``decode_finish_to`` rows (or
    ``decode_rows``, if more; at most: fewer rows are rounded up to a power of two) and
    ``finish_rows`` above; ``finish_registers`` / ``decode_finish_registers`` (above / up to
    there, and ``finish_registers`` in the tail): the coefficients as one [rows] vector per
    coefficient (runtime/kernels/mhc.py, ``REG_FINISH``) instead of [rows, 4, 4] tensors;
    ``fast_reciprocal``: on CUDA, the register form's Sinkhorn takes its reciprocals
    without div.full's range checks (``FAST_RCP``); ``pin_mix``: on CUDA, a dot in the
    mixing loop takes X' as mixed once (``PIN_MIX``; the module docstring says why);
    ``fma_mix_from``: calls of at least this many rows take the sweep's mixing, collapse
    and sum of squares as fused multiply-adds (``FMA_MIX``; the module docstring says why;
    0: every call). Three H200 sweeps (tile_sweep_h200_mhc_fma_mix_{1,2,3}.md) found
    it faster at 512 and 4,096 rows, ``mid`` and ``flash``, in every run (``mid`` 4,096
    rows 130.6-131.6 -> 123.3-123.6 us, ``flash`` 512 rows 41.6-43.1 -> 39.1-40.4 us),
    and below that faster in every run at ``flash`` (1, 8, 64 rows) and at ``mid`` 8 rows,
    but slower in 2 of 3 at ``mid`` 1 and 64 rows, so it started at 512. From 8 since
    session 41: on the H100 (tile_sweep_h100_session41_mhc_fma_mix.md, four runs; at 1
    and 8 rows session 38 a fifth) it was faster at ``mid`` 16 rows in 4 of 4 (medians
    8.98 -> 8.57 us), 8 and 64 in 3 of 4 (8.69 -> 8.40, 10.71 -> 10.52), ``flash`` 8 and
    64 in 4 of 4 (9.40 -> 9.14, 15.83 -> 15.18), 16 in 3 of 4 (9.85 -> 9.62); at one row a
    tie on both cards and at 2 rows within 0.1 us. A second H100 session
    (tile_sweep_h100_session42_mhc.md) had it faster than the old rule in 18 of 20 timings at
    8-256 rows; at 32, 128 and 256 rows (untimed before) in 2 of 2 at both scales. The
    H200's ``mid`` 64 rows (11.36 /
    11.50 / 11.63 -> 11.44 / 11.86 / 11.22, medians 11.50 -> 11.44) is a wash; 16-32 and
    128-256 rows were not timed on the H200. Static sm_90 under Triton 3.6
    (tests/runtime/compile_sm90.py --sass): the 8- and 16-row sweeps' loop 1,455 -> 1,276
    instructions and 8 bytes of stack (a spill) -> 0; 64 rows 1,464 -> 1,289. At decode the
    stored X' had matched the reference's bit for bit; now some land one bf16 ulp away (up
    to 2.3e-3 of the largest output at ``mid`` 16 rows), and a CPU emulation finds the fused
    form the closer to the exact X' (benchmarks/results/fma_mixing_cpu.md: 161 of 5.2 M
    stored values not the nearest bf16, against 228 with separate roundings);
    ``decode_tf32x2_from``: decode calls (at most ``decode_rows``) of at least this many rows
    project with "tf32x2" where they would take "tf32x3" (1-2 rows keep the multiply-adds).
    Measured on an H100 with the variants of a case read in turn (session 43, us, tf32x3 ->
    tf32x2): ``mid`` 8 rows 8.41 / 7.62 / 8.11 / 8.23 -> 8.17 / 7.42 / 7.90 / 8.05, 16 rows
    9.07 / 9.06 / 8.36 / 8.47 -> 8.80 / 8.21 / 8.10 / 8.23, ``flash`` 8 rows 9.14 / 9.41 /
    8.97 / 9.01 -> 8.96 / 8.94 / 8.78 / 8.86, 16 rows 10.12 / 9.47 / 9.40 / 9.37 -> 9.84 /
    9.25 / 9.24 / 9.24 (tile_sweep_h100_session43_mhc_decode.md,
    tile_sweep_h100_session43_tf32x2_decode.md, tile_sweep_h100_session43_tf32x2_rows_{1,2}.md):
    faster in all 16; at 3-4 rows faster at ``mid`` in 2 of 2 (e.g. 3 rows 7.81 -> 7.58) but
    at ``flash`` in 1 of 2 (3 rows 8.96 -> 9.28 and 8.92 -> 8.83), so from 8. Above decode
    rows "tf32x2" lost (64 rows and up, the module docstring), and at 1-2 rows it lost to
    the multiply-adds (``mid`` one row 5.72 -> 7.65 us). Its precision equals "tf32x3"'s
    (mhc_precision_h200_fma_mix.md). Static sm_90 under Triton 3.6 (the GPU machine's;
    tests/runtime/compile_sm90.py): the 8- and 16-row sweep loop 1,276 -> 749 instructions,
    255 registers and no stack either way; Triton 3.9 keeps 8 bytes of stack in ``flash``'s
    8-row sweep with it (untimed on that Triton). Not timed on the H200;
    ``decode_bf16x3_from``: decode calls of at least this many rows project with "bf16x3"
    (fn's three bf16 parts; bf16 streams: float32 ones take "tf32x3", float16 ones
    "tf32x2"), ahead of the two rules above. On an H100 with the variants of a case read in
    turn (session 44, us, "tf32x2" -> "bf16x3"): ``mid`` 8 rows 9.81 / 8.12 -> 9.59 / 7.89,
    16 rows 9.36 / 8.29 -> 9.14 / 8.04, ``flash`` 8 rows 9.88 / 8.91 -> 9.70 / 8.69, 16 rows
    10.88 / 9.33 -> 10.85 / 9.23 (tile_sweep_h100_session44_bf16x3_decode_1.md,
    tile_sweep_h100_session44_bf16x3_rows.md): faster in 8 of 8 over two runs, so from 8.
    Against "tf32x3" at 3-4 rows it was faster in 4 of 4 of one run (``mid`` 7.87 / 8.53 ->
    7.45 / 8.10, ``flash`` 9.00 / 9.03 -> 8.62 / 8.68), by about as much as identical
    configurations have read apart in one run (0.4 us, session 43), so 3-7 rows waited for
    a second run. Session 45 (another H100; tile_sweep_h100_session45_decode_*.md) had it
    faster there in two more runs, 8 of 8 ("tf32x3" -> "bf16x3": ``mid`` 3 rows 7.88 / 8.48
    -> 7.46 / 8.06, 4 rows 8.55 / 8.52 -> 8.08 / 8.09, ``flash`` 3 rows 8.96 / 8.89 -> 8.58
    / 8.54, 4 rows 9.02 / 9.01 -> 8.68 / 8.68), while the same configuration read twice
    moved 0.00-0.04 us, so from 3. At one row it lost to the
    multiply-adds (``mid`` 5.74 -> 7.58 us). As close to the float64 oracle as "tf32x3"
    (mhc_precision_h100_session44.md). Static sm_90 under Triton 3.6: the 8-row ``mid``
    sweep's loop 749 -> 699 instructions, 255 -> 128 registers. Not timed on the H200;
    ``dependent_finish_to``:
    calls of at most this many rows launch their second (finishing) launch dependent on the sweep
    (Hopper's programmatic dependent launch, runtime/kernels/pdl.py; CUDA only; 0: never).
    64: dependent_launch_h200.md, mid 1 / 8 / 64 rows 6.63 -> 6.19, 9.55 -> 8.75, 11.71 ->
    11.53 us, flash 7.75 -> 6.89, 10.18 -> 10.20, 16.54 -> 16.23 us, the same bits; from
    256 rows it costs (tile_sweep_h200_mhc_pdl_rows_1.md: mid 512 rows 22.5 -> 26.6 us,
    flash 512 rows 38.9 -> 44.1 us): the sweep then runs in more than one wave, and the
    finishing launch's programs, resident early and waiting, take the slots its later
    programs need; ``finish_at_exit_from``: dependent calls of at least this many rows let
    the finish launch as the sweep's programs exit instead of from their start (pdl.py;
    untimed, so from 2^30); ``stages``: the sweep's software-pipelining stages (Triton's
    ``num_stages``; 0: Triton's default, 3 on sm_90): its loads are copied ahead into shared
    memory, one buffer per stage (static sm_90, Triton 3.6, mid 4,096 rows: "tf32x3" 4 / 17 /
    31 KB at 1 / 2 / 3 stages, "bf16x3" 10 / 22 / 39 KB; 1 stage loads into registers);
    ``decode_stages``: the same for decode calls (0: as ``stages``). Why: the decode tiles
    copy 64-column tiles of fn's three bf16 parts ahead, and at 3 stages the sweep asks 124
    KB of shared memory (static sm_90, Triton 3.6, "bf16x3", 16 x 64 tiles on 4 warps), so
    one program an SM; at ``flash`` (80 splits over D) 17-48 rows make 160-240 programs, two
    waves on 132 SMs, where "tf32x3" (92 KB, two an SM) fits one, which may be why it beat
    "bf16x3" there (tile_sweep_h100_session45_decode48_1.md). At 2 stages 66 KB, three an
    SM. 2 since session 46: on an H100 faster than 3 stages in all 24 cases of two runs at
    8-48 rows (``flash`` 17 rows 12.87 / 11.68 -> 11.68 / 10.60 us, 48 rows 13.34 / 13.30 ->
    11.64 / 11.60; ``mid`` 8 rows 7.26 / 7.24 -> 7.06 / 7.04) and at 3-4 rows (0.1-0.4 us),
    a tie at 1-2 rows, which multiply-add (tile_sweep_h100_session46_decode_stages_*.md);
    32-column tiles instead ("decode d32", 62 KB) were slower than 3 stages at every
    ``flash`` count and at ``mid`` from 17 rows (at ``mid`` 8 rows 0.05 us ahead of 2
    stages). With 2 stages the decode tiles also beat the tiles above decode at ``flash``
    17-20 rows (session 45's one regression; 17 rows 11.32 / 12.26 -> 10.75 / 11.67 us,
    tile_sweep_h100_session46_s2_17_48_{1,2}.md), "bf16x3" beat "tf32x3" on them at every
    count from 17 to 48 rows at both scales (by 0.7-1.1 us; in session 45 "tf32x3" won at
    ``flash`` from 20 rows), and the decode tiles reach further (``decode_rows``);
    ``coefficients_per_tile``: the sweep loads the previous sublayer's post and combination
    (20 floats a row) in every D tile instead of once before its loop. Why: held through the
    loop they cost about two registers per coefficient per row a thread holds, and at 64
    rows on 2 warps that pushed the sweep past 255 registers into spills. Static sm_90
    under Triton 3.6, ``mid`` 4,096 rows, "bf16x3" on 64 x 16 tiles: 255 registers and 64
    bytes of stack -> 182 and none (2 stages: 255 + 40 -> 197 + none, 31 -> 36 KB of shared
    memory, so 5 programs of 64 rows an SM against the default's 4 of 32); at the default's
    own tiles it costs (250 -> 255 registers, loop 1,344 -> 1,431 instructions). The
    pipeliner copies them ahead with the tiles, four bytes a copy (cp.async.ca, which
    caches in L1: a program re-reads its own rows' coefficients, 5 KB at 64 rows, from L1
    while they stay there), and a stage's shared memory grows by those 5 KB. Off: on an H100
    every 64-row "bf16x3" sweep was 1.5-2.2x slower than the default (``mid`` 4,096 rows
    131.4 us against 201.8 per tile at 3 stages, 234.7 per tile and 232.1 held at 2;
    tile_sweep_h100_session45_per_tile.md), and per tile or held made no difference at 2
    stages; ``tail_elements``: most partials (rows x splits x 16) a finishing program loads at
    once, and most elements the tail normalises at once; ``reload_d`` / ``tail_reload_d``:
    the columns mixed before the projection re-reads them, below / from ``tail_rows`` rows
    (0 = project in the mixing loop; rounded up to whole D tiles; multiply-add tilings never
    re-read); ``apart_from``: calls above decode of at least this many rows (and not
    multiply-add) project in a launch of their own: the sweep mixes, collapses and sums
    squares without the projection (``apart_sweep_t`` x ``apart_sweep_d`` tiles on
    ``apart_sweep_warps`` warps, split over D until ``apart_programs``), a second launch
    re-reads X' and projects each split of it (``apart_t`` x ``apart_d`` tiles, ``apart_d``
    cut to divide the split, on ``apart_warps`` warps), and the finishing launch follows, no
    tail. Why try it (session 49): on an H100 ncu found the ``flash`` 4,096-row tail held
    by latency at low occupancy, not by DRAM: 250 registers, 8 warps an SM, each issuing
    every 3.6 cycles; DRAM 49 % busy, L2 62 % (benchmarks/results/ncu_h100_session49_mhc.md).
    Its loop spends about 42 static instructions per (row, column, stream) element; without
    the projection the sweep compiles to about 15, on 16 x 64 tiles in 103 registers (four
    programs of 4 warps an SM; benchmarks/tile_sweep.py's "apart" variants have the
    counts). Apart, the sweep is elementwise work and the projection a skinny GEMM. The
    price: the projection reads X' once more and the finish reads and writes x once more
    (at ``mid`` 4,096 rows 268 MB against the tail's 169), and there are two more
    launches. Untimed until the GPU's sweep, so off (2^30).

    The defaults are the H200's best of benchmarks/results/tile_sweep_h200_mhc_3.md: at 1-8
    rows the finish with 1 warp (mid: 8.2 / 9.3 / 16.8 us at 1 / 2 / 8 rows vs 8.8 / 10.1 /
    18.1 with 2); from 1,024 rows 32 x 16 tiles (4,096 rows: 160 vs 172 us at mid, 362 vs
    413 us at flash; at 64 rows they lost, 26.5 vs 18.3 us). No re-read, the mixing pinned:
    tile_sweep_h200_mhc_pin.md. One row per decode finishing program:
    tile_sweep_h200_mhc_finish.md; that finish up to 256 rows (``decode_finish_to``) and the
    register coefficients above it: tile_sweep_h200_decode_finish_to.md."""

    projection: str = ""
    block_t: int = 16
    block_d: int = 32
    num_warps: int = 2
    decode_rows: int = 192
    decode_projection: str = ""
    decode_tf32x2_from: int = 8
    decode_bf16x3_from: int = 3
    decode_block_t: int = 0
    decode_block_d: int = 64
    decode_warps: int = 4
    decode_finish_warps: int = 1
    decode_finish_rows: int = 1
    finish_rows: int = 8
    decode_finish_to: int = 256
    fma_rows: int = 2
    programs: int = 512
    decode_programs: int = 264
    narrow_decode_programs: int = 132
    narrow_d: int = 2048
    tail_rows: int = 1024
    tail_block_t: int = 32
    tail_block_d: int = 16
    tail_elements: int = 4096
    finish_warps: int = 2
    split: bool | None = None
    reload_d: int = 0
    tail_reload_d: int = 0
    finish_registers: bool = True
    decode_finish_registers: bool = True
    pin_mix: bool = True
    fast_reciprocal: bool = True
    fma_mix_from: int = 8
    dependent_finish_to: int = 64
    finish_at_exit_from: int = 1 << 30
    stages: int = 0
    decode_stages: int = 2
    coefficients_per_tile: bool = False
    apart_from: int = 1 << 30
    apart_sweep_t: int = 16
    apart_sweep_d: int = 64
    apart_sweep_warps: int = 4
    apart_programs: int = 2048
    apart_t: int = 64
    apart_d: int = 64
    apart_warps: int = 4

    def __post_init__(self) -> None:
        for name in ("projection", "decode_projection"):
            value = getattr(self, name)
            if value and value not in PROJECTIONS:
                raise ValueError(f"MhcPolicy.{name}: expected one of {PROJECTIONS} or '', got {value!r}")
        for name in ("decode_finish_rows", "finish_rows"):
            rows = getattr(self, name)
            if rows < 1 or rows & (rows - 1):
                raise ValueError(f"MhcPolicy.{name}: expected a power of two >= 1, got {rows}")
        for name in ("decode_finish_to", "fma_mix_from", "dependent_finish_to", "finish_at_exit_from",
                     "decode_tf32x2_from", "decode_bf16x3_from"):
            if getattr(self, name) < 0:
                raise ValueError(f"MhcPolicy.{name}: expected a row count >= 0, got {getattr(self, name)}")
        if self.stages < 0:
            raise ValueError(f"MhcPolicy.stages: expected >= 0 (0 = Triton's default), got {self.stages}")
        if self.decode_programs < 0:
            raise ValueError(f"MhcPolicy.decode_programs: expected >= 0 (0 = as ``programs``), got {self.decode_programs}")
        if self.narrow_decode_programs < 0:
            raise ValueError("MhcPolicy.narrow_decode_programs: expected >= 0 (0 = as ``decode_programs``), "
                             f"got {self.narrow_decode_programs}")
        if self.narrow_d < 0:
            raise ValueError(f"MhcPolicy.narrow_d: expected a hidden size >= 0, got {self.narrow_d}")
        if self.decode_stages < 0:
            raise ValueError(f"MhcPolicy.decode_stages: expected >= 0 (0 = as ``stages``), got {self.decode_stages}")
        if self.apart_from < 0:
            raise ValueError(f"MhcPolicy.apart_from: expected a row count >= 0, got {self.apart_from}")
        for name in ("apart_sweep_t", "apart_sweep_d", "apart_t", "apart_d"):
            size = getattr(self, name)
            least = 1 if name == "apart_sweep_t" else DOT_ROWS
            if size < least or size & (size - 1):
                raise ValueError(f"MhcPolicy.{name}: expected a power of two >= {least}, got {size}")
        for name in ("reload_d", "tail_reload_d"):
            if getattr(self, name) < 0:
                raise ValueError(f"MhcPolicy.{name}: expected >= 0 (0 = project in the mixing loop), "
                                 f"got {getattr(self, name)}")

    def tiling(self, t: int, d: int, cuda: bool) -> MhcTiling:
        decode = t <= self.decode_rows
        asked = self.decode_projection if decode else self.projection
        dot = ("bf16x3" if decode and t >= self.decode_bf16x3_from else
               "tf32x2" if decode and t >= self.decode_tf32x2_from else "tf32x3")
        projection = asked or ("fma" if t <= self.fma_rows else dot if cuda else "ieee")
        apart = not decode and t >= self.apart_from and projection != "fma"
        tail = t >= self.tail_rows and not apart
        block_t = self.decode_block_t if decode else self.tail_block_t if tail else self.block_t
        if apart:  # the sweep has no dot: any power of two of rows
            block_t = self.apart_sweep_t
        elif projection == "fma":
            block_t = min(block_t or FMA_ROWS, FMA_ROWS, next_pow2(t))
        else:
            block_t = max(DOT_ROWS, block_t)
        block_d = (self.apart_sweep_d if apart else self.decode_block_d if decode else
                   self.tail_block_d if tail else self.block_d)
        warps = self.apart_sweep_warps if apart else self.decode_warps if decode else self.num_warps
        chunks = cdiv(d, block_d)
        target = (self.narrow_decode_programs if self.narrow_decode_programs and d <= self.narrow_d else
                  self.decode_programs or self.programs)
        programs = min(self.programs, target) if decode else self.apart_programs if apart else self.programs
        splits = 1 if self.split is False else min(chunks, cdiv(programs, cdiv(t, block_t)))
        split_d = cdiv(chunks, max(1, splits)) * block_d
        decode_finish = not tail and t <= max(self.decode_rows, self.decode_finish_to)
        tail_t = min(block_t, 8) if tail else min(self.decode_finish_rows if decode_finish else self.finish_rows,
                                                  next_pow2(t))
        chunk = max(2, min(next_pow2(cdiv(d, split_d)), self.tail_elements // (tail_t * 16)))
        tail_d = max(block_d, min(next_pow2(d), self.tail_elements // tail_t))
        reload_d = 0 if projection == "fma" or apart else cdiv(self.tail_reload_d if tail else self.reload_d,
                                                               block_d) * block_d
        registers = self.decode_finish_registers if decode_finish else self.finish_registers
        return MhcTiling(projection, block_t, block_d, split_d, warps, tail, tail_t, tail_d, chunk,
                         finish_warps=self.decode_finish_warps if decode_finish else self.finish_warps, reload_d=reload_d,
                         finish_registers=registers,
                         pin_mix=self.pin_mix and cuda and projection != "fma" and reload_d == 0 and not apart,
                         fast_reciprocal=self.fast_reciprocal and cuda and registers,
                         fma_mix=t >= self.fma_mix_from, bf16_operands=cuda,
                         stages=(self.decode_stages or self.stages) if decode else self.stages,
                         coefficients_per_tile=self.coefficients_per_tile,
                         apart_t=self.apart_t if apart else 0,
                         apart_d=math.gcd(split_d, self.apart_d) if apart else 0, apart_warps=self.apart_warps)


# Interpreted kernels cost time per program, not parallelism: one program per row block.
INTERPRETED = MhcPolicy(split=False, block_d=64, decode_block_d=64)
