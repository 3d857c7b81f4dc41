"""Triton top-k over indexer scores: a radix select, one program per row or, for few rows,
per (row, chunk) and then over the chunks' candidates (DeepSelect's role).

Same rule as :func:`runtime.kernels.reference.topk_entries` (a stable sort): each row's k
largest scores, ties at the k-th value to the lowest indices, -inf never picked, the ids
returned ascending, -1 padded when fewer than k scores are > -inf.

Why this shape. Triton's older lowering of ``tl.histogram`` is one warp ballot per bit
of the bin index plus, per element, an AND chain and a popcount for every bin a lane owns
(bins / 32 of them): counting its instructions (not measured), about one warp instruction
per element at 32 bins and about 60 at 4096, so a 12-bit radix pass over a 128k row in
one program would cost more than the ``torch.topk`` path it replaces. Newer Triton emits
one shared-memory atomic per element instead. The H200's Triton 3.6.0 has the ballot form:
a 32-bin ``tl.histogram`` of a 1,024-element tile on 8 warps, compiled for sm_90, has 20
``vote.sync.ballot``, 4 ``popc`` and one shared atomic (the warps' counts) in its PTX, and
with 256 / 2,048 bins 32 / 44 ballots and 32 / 256 ``popc``; Triton 3.9.0 compiles the
32-bin one to 4 shared atomics and no ballot (checked with tests/runtime/compile_sm90.py's
``compile_sm90``, session 24). Either way the kernel runs 5-bit passes (32 bins) and only
over a short candidate list, found in two element-wise sweeps of the row:

1. scores -> order-preserving uint32 keys (``-0.0`` canonicalised to ``+0.0`` first, so
   key order == float order and equal floats have equal keys); the row is read as
   ``GROUPS`` interleaved groups (group j = positions j, j + GROUPS, ...), keeping each
   group's largest key and the count of scores > -inf (F). need = min(k, F).
2. The need-th largest group maximum is a lower bound of the need-th largest key v (there
   are ``need`` distinct elements at least that large); four radix passes over the
   ``GROUPS`` maxima (stored to the row's scratch) give its top 20 bits, ``lo``. Fewer
   than ``need`` finite groups: ``lo`` = the smallest finite key.
3. A sweep in index order copies every finite key >= lo and its id to a per-row scratch
   list (positions from a running count + ``tl.cumsum``), so the list stays ascending.
   For N(0, 1) scores (a numpy emulation of this bound, 4096 groups, 5 rows each) it holds
   522-560 entries at k = 512 and 2386-2830 at k = 2048 (N = 8192-131072); with heavy
   ties it can hold the whole row (still exact, just slower).
4. Seven radix passes (5+5+5+5+5+5+2 bits) over the list give v exactly and ``room``, the
   number of entries == v that are taken.
5. A sweep of the list writes picked = key > v or (key == v and tie rank < room) at
   running count + exclusive cumsum, then -1 up to k.

Out-of-range elements and excluded ones go to bin 0, whose count is then corrected, so
the kernel does not depend on ``tl.histogram``'s ``mask`` argument (not in every Triton).
NaN scores are outside the rule (the reference has none to follow) and are not handled.

Few rows: a row split over programs (``runtime/kernels/topk_tiles.py`` decides when).
One program reads a whole row, so a decode step at batch 1 ran on one SM. Split, row r is
cut into C chunks of consecutive keys; launch 1 runs this kernel once per (row, chunk),
each selecting its chunk's k with the same rule and writing (score, id) pairs, -inf / -1
padded, chunk after chunk: row r's C x k candidates lie in ascending id order (padding
aside). Launch 2 runs the same kernel on that candidate row and maps the picked positions
back to ids. Why the result is the reference's, exactly: order the keys of a row by
(score descending, index ascending); the reference takes the first k finite ones, W.
Take w in W, in chunk c. The keys of chunk c that come before w in that order also come
before it in the whole row, and fewer than k do, so w is among chunk c's first k, and it
is finite: it is one of chunk c's candidates. So every winner is a candidate; a
candidate not in W comes after every member of W in the order; and launch 2's order is
the same order (its positions rise with the ids, and the scores are copied bit for bit,
-0.0 made +0.0 as in step 1, an equal-key tie either way). Launch 2's first k finite
candidates are therefore W. Fewer than k finite scores: each chunk keeps all of its
finite ones, so launch 2 sees, and takes, all of them.

Why chunks and not one radix select over the whole row by many programs (per-row
histograms in global memory, atomics): that select needs the row's histogram complete
before the next digit is known, i.e. a grid-wide barrier per pass, so several launches
per pass, or a spin-wait on a counter that only works while every program is resident,
plus zeroed histograms for each call (a memset, or a ticket to clear them), and the ties
at the k-th key still need an index-ordered count across programs. The chunked form is
two launches of one kernel whose exactness is the one-pass kernel's (the same code, its
tests), needs no atomics, no zeroing (scratch and candidates are ``torch.empty``; every
slot a program reads was written before, by itself or by launch 1) and no host sync, so it is captured in a CUDA
graph like the one-pass kernel. What it costs: launch 2 reads C x k candidates in one
program per row, which the policy bounds (a quarter of the row at most).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import triton.language as tl

from runtime.kernels.backend import jit, next_pow2
from runtime.kernels.pdl import dependent_launch, gdc_enter
from runtime.kernels.tickets import TicketCounters
from runtime.kernels.topk_radix import (
    KEY_NEG_INF,
    RADIX_BINS,
    RADIX_HELPERS,
    _digit_histogram,
    _keys_of,
    _take_digit,
)
from runtime.kernels.topk_resident import RESIDENT_HELPERS, _topk_resident_kernel
from runtime.kernels.topk_rowbound import (
    ROW_BOUND_HELPERS,
    _row_candidates_kernel,
    _row_maxima_kernel,
    _row_select_kernel,
)
from runtime.kernels.topk_tiles import (
    RESIDENT_MAX,
    SMALLEST,
    TopkSplit,
    TopkSplitPolicy,
    require_powers_of_two,
)


@dataclass(frozen=True)
class TopkTiling:
    """``groups``: interleaved groups of phase 1 (power of two; their maxima sit in
    registers: 16 per thread at 4096 groups and 8 warps); ``block``: elements per step
    over the candidate list (power of two); ``num_warps``: per program; ``unroll``: tiles
    of ``groups`` scores each sweep of the row loads per loop iteration (more loads in
    flight for the one program that reads a whole row). Tests shrink
    ``groups`` so the candidate path runs on tiny rows. ``scratch_entries``: the most
    entries of each scratch list (key, id: 4 bytes each) one launch may use; a row needs
    max(N, groups) of them (its worst case: every score a candidate), so a long prefill
    runs in several launches of that many rows instead of holding 8 bytes x T x N."""

    groups: int = 4096
    block: int = 1024
    num_warps: int = 8
    unroll: int = 2
    scratch_entries: int = 1 << 25

    def __post_init__(self) -> None:
        require_powers_of_two(self, ("groups", "block"))
        if self.unroll < 1:
            raise ValueError(f"TopkTiling.unroll: expected >= 1, got {self.unroll}")


def _topk_kernel(scores_ptr, cand_key_ptr, cand_id_ptr, out_ptr, out_score_ptr, id_map_ptr, ROW_N, CHUNK, K,
                 STRIDE, GROUPS: tl.constexpr, BLOCK: tl.constexpr, UNROLL: tl.constexpr,
                 SCORES: tl.constexpr, MAPPED: tl.constexpr, PDL: tl.constexpr = False):
    """One program per (row, chunk): program (r, c) selects among keys [c x CHUNK, (c + 1) x
    CHUNK) of row r (ROW_N keys; one chunk of CHUNK >= ROW_N is the whole row) and writes k
    ids to output row r x chunks + c. ``SCORES``: also the picked scores (-inf padded): a
    split's first launch, writing its candidates for the second; ``MAPPED``: the ids written are ``id_map[r, position]``
    (the second pass reading candidates) instead of the chunk's offset + position.
    The passes are one loop over the radix steps of runtime/kernels/topk_radix.py. ``PDL``: the
    second launch (MAPPED) is launched dependent on the first (runtime/kernels/pdl.py)."""
    if PDL:
        gdc_enter(MAPPED)
    row = tl.program_id(0).to(tl.int64)
    part = tl.program_id(1)
    base = part * CHUNK
    N = tl.minimum(CHUNK, ROW_N - base)  # this program's keys
    src = scores_ptr + row * ROW_N + base
    slot_row = row * tl.num_programs(1) + part
    cand_key = cand_key_ptr + slot_row * STRIDE
    cand_id = cand_id_ptr + slot_row * STRIDE
    dst = out_ptr + slot_row * K
    lanes = tl.arange(0, GROUPS)

    # 1. group maxima (as keys: -0.0 -> +0.0, sign-flipped bits) and the count of scores > -inf
    best = tl.full((GROUPS,), KEY_NEG_INF, dtype=tl.uint32)
    finite = tl.zeros((GROUPS,), dtype=tl.int32)
    for start in range(0, N, GROUPS * UNROLL):
        for u in tl.static_range(UNROLL):  # UNROLL tiles in flight per iteration
            offs = start + u * GROUPS + lanes
            keys = _keys_of(tl.load(src + offs, mask=offs < N, other=float("-inf")))
            best = tl.maximum(best, keys)
            finite += (keys > KEY_NEG_INF).to(tl.int32)
    need = tl.minimum(tl.sum(finite, axis=0), K)
    enough_groups = tl.sum((best > KEY_NEG_INF).to(tl.int32), axis=0) >= need
    tl.store(cand_key + lanes, best.to(tl.int32, bitcast=True))
    # other threads of this program read what was just stored: a CTA barrier orders it
    tl.debug_barrier()
    count = tl.full([], GROUPS, dtype=tl.int32)
    prefix = tl.zeros([], dtype=tl.uint32)
    left = need

    # radix passes of 5 bits: 0-3 over the group maxima (top 20 bits of the need-th largest,
    # a lower bound lo of v), 4-10 over the candidate list (all 32 bits of v)
    for p in tl.static_range(11):
        if p == 4:
            # 3. the candidate list: finite keys >= lo, in index order (it overwrites the
            # maxima: every thread's last read of them is done before the first write)
            tl.debug_barrier()
            lo = tl.where(enough_groups, prefix, KEY_NEG_INF + 1)
            count = tl.zeros([], dtype=tl.int32)
            limit = tl.where(need > 0, N, 0)  # no candidates when nothing is picked
            for start in range(0, N, GROUPS * UNROLL):
                for u in tl.static_range(UNROLL):
                    offs = start + u * GROUPS + lanes
                    keys = _keys_of(tl.load(src + offs, mask=offs < N, other=float("-inf")))
                    take = (offs < limit) & (keys > KEY_NEG_INF) & (keys >= lo)
                    slot = count + tl.cumsum(take.to(tl.int32), axis=0) - 1
                    tl.store(cand_key + slot, keys.to(tl.int32, bitcast=True), mask=take)
                    tl.store(cand_id + slot, offs, mask=take)
                    count += tl.sum(take.to(tl.int32), axis=0)
            tl.debug_barrier()
            prefix = tl.zeros([], dtype=tl.uint32)
            left = need
        q = p - 4 * (p >= 4)  # constexpr (from p), re-bound every unrolled pass
        shift = (27 - 5 * q) * (q < 6)
        width = 5 - 3 * (q == 6)
        hist = tl.zeros((32,), dtype=tl.int32)
        for start in range(0, count, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            keys = tl.load(cand_key + offs, mask=offs < count, other=0).to(tl.uint32, bitcast=True)
            hist += _digit_histogram(keys, (offs < count) & (keys > KEY_NEG_INF), prefix, shift, width)
        prefix, left = _take_digit(hist, left, prefix, shift)  # the bin holding the left-th largest key
    v = prefix  # the need-th largest key; left = entries equal to v that are taken

    # 5. ascending ids of the picked entries, then -1 up to k
    written = tl.zeros([], dtype=tl.int32)
    ties = tl.zeros([], dtype=tl.int32)
    for start in range(0, count, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        ok = offs < count
        keys = tl.load(cand_key + offs, mask=ok, other=0).to(tl.uint32, bitcast=True)
        tie = ok & (keys == v)
        tie_rank = ties + tl.cumsum(tie.to(tl.int32), axis=0) - 1
        picked = ok & ((keys > v) | (tie & (tie_rank < left)))
        slot = written + tl.cumsum(picked.to(tl.int32), axis=0) - 1
        ids = tl.load(cand_id + offs, mask=picked, other=0)
        if MAPPED:
            ids = tl.load(id_map_ptr + row * ROW_N + ids, mask=picked, other=-1)
        else:
            ids = ids.to(tl.int64) + base
        tl.store(dst + slot, ids, mask=picked)
        if SCORES:  # the key back to its float: inverse of the map of step 1
            bits = tl.where((keys >> 31) != 0, keys & 0x7FFFFFFF, ~keys)
            tl.store(out_score_ptr + slot_row * K + slot, bits.to(tl.float32, bitcast=True), mask=picked)
        written += tl.sum(picked.to(tl.int32), axis=0)
        ties += tl.sum(tie.to(tl.int32), axis=0)
    for start in range(0, K, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        pad = (offs >= written) & (offs < K)
        tl.store(dst + offs, tl.full((BLOCK,), -1, dtype=tl.int64), mask=pad)
        if SCORES:
            tl.store(out_score_ptr + slot_row * K + offs, tl.full((BLOCK,), float("-inf"), dtype=tl.float32),
                     mask=pad)


CHAINED_HELPERS = (*RADIX_HELPERS, gdc_enter)  # the chained kernel's, jitted with it


class FusedTopk:
    """Callable with :func:`runtime.kernels.reference.topk_entries`'s signature. ``policy``
    decides per call whether rows are split over programs (runtime/kernels/topk_tiles.py);
    ``tiling`` is the one-pass kernel's."""

    def __init__(self, tiling: TopkTiling | None = None, policy: TopkSplitPolicy | None = None) -> None:
        self.tiling = tiling or TopkTiling()
        self.policy = policy or TopkSplitPolicy()
        self.kernel = jit(_topk_kernel, helpers=CHAINED_HELPERS)
        self.resident_kernel = jit(_topk_resident_kernel, helpers=RESIDENT_HELPERS)
        self.tickets = TicketCounters()  # the one-launch resident split's row counters
        self.row_bound_kernels = tuple(jit(kernel, helpers=ROW_BOUND_HELPERS) for kernel in (
            _row_maxima_kernel, _row_candidates_kernel, _row_select_kernel))

    def __call__(self, scores: torch.Tensor, k: int) -> torch.Tensor:
        t, n = scores.shape
        if t == 0 or n == 0 or k <= 0:
            return torch.full((t, max(k, 0)), -1, dtype=torch.int64, device=scores.device)
        scores = scores.float().contiguous()  # exact for bf16/fp16: same order, same ties
        out = torch.empty(t, k, dtype=torch.int64, device=scores.device)
        return self.run(scores, k, self.policy.split(t, n, k), out)

    def run(self, scores: torch.Tensor, k: int, split: TopkSplit, out: torch.Tensor | None = None) -> torch.Tensor:
        """Top-k of float32 ``scores`` [T, N] (contiguous, T, N, k > 0) with ``split``:
        ``ONE_PASS``, or two launches over ``split.chunks`` chunks (tests force any split,
        one chunk included, that the policy would not choose)."""
        t, n = scores.shape
        out = torch.empty(t, k, dtype=torch.int64, device=scores.device) if out is None else out
        if split.chunk == 0:
            self.select(scores, out, k, n, 1, self.tiling.groups, self.tiling.num_warps)
            return out
        if split.chunks != -(-n // split.chunk):
            raise ValueError(f"TopkSplit: {split.chunks} chunks of {split.chunk} do not cover {n} keys exactly")
        if split.resident:
            return self.run_resident(scores, k, split, out)
        if split.row_bound is not None:
            return self.run_row_bound(scores, k, split, out)
        width = split.candidates(k)  # chunk c of row r fills [r, c k : (c + 1) k]
        cand_scores = torch.empty(t, width, dtype=torch.float32, device=scores.device)
        cand_ids = torch.empty(t, width, dtype=torch.int64, device=scores.device)
        # one scratch for both launches: the second starts after the first is done with it
        entries = max(self.layout(t, split.chunk, split.chunks, split.groups)[3],
                      self.layout(t, width, 1, split.groups)[3])
        scratch = torch.empty(2 * entries, dtype=torch.int32, device=scores.device)
        pdl = dependent_launch(self.policy.dependent_select, scores.device)
        self.select(scores, cand_ids, k, split.chunk, split.chunks, split.groups, split.num_warps, scratch,
                    out_scores=cand_scores, pdl=pdl)
        self.select(cand_scores, out, k, width, 1, split.groups, split.num_warps, scratch, id_map=cand_ids, pdl=pdl)
        return out

    def run_resident(self, scores: torch.Tensor, k: int, split: TopkSplit, out: torch.Tensor) -> torch.Tensor:
        """``split`` with the register-resident select (runtime/kernels/topk_resident.py):
        one launch over whole rows when ``split.chunks`` is 1; else the chunks' launch and
        the candidates' launch or, with ``split.one_launch``, one launch whose row's last
        chunk program selects among the candidates (a ticket); each program holds its keys
        in registers."""
        t, n = scores.shape
        width = split.candidates(k)
        longest = split.chunk if split.chunks == 1 else max(split.chunk, width)
        if next_pow2(longest) > RESIDENT_MAX:
            raise ValueError(f"TopkSplit: a resident program holds at most {RESIDENT_MAX} keys, "
                             f"this split needs {next_pow2(longest)}")
        slots = self.resident_list(longest, k)
        scratch = torch.empty(t * split.chunks * slots, dtype=torch.int32, device=scores.device)
        if split.chunks == 1:
            self.resident_launch(scores, scratch, slots, out, k, n, 1, split.groups, split.num_warps)
            return out
        cand_scores = torch.empty(t, width, dtype=torch.float32, device=scores.device)
        cand_ids = torch.empty(t, width, dtype=torch.int64, device=scores.device)
        if split.one_launch:
            self.resident_launch(scores, scratch, slots, out, k, split.chunk, split.chunks, split.groups,
                                 split.num_warps, candidates=(cand_ids, cand_scores, width))
            return out
        pdl = dependent_launch(self.policy.dependent_select, scores.device)
        self.resident_launch(scores, scratch, slots, cand_ids, k, split.chunk, split.chunks, split.groups,
                             split.num_warps, out_scores=cand_scores, pdl=pdl)
        self.resident_launch(cand_scores, scratch, slots, out, k, width, 1, split.groups, split.num_warps,
                             id_map=cand_ids, pdl=pdl)
        return out

    def run_row_bound(self, scores: torch.Tensor, k: int, split: TopkSplit, out: torch.Tensor) -> torch.Tensor:
        """``split`` with the row-bound select (runtime/kernels/topk_rowbound.py): the
        chunks' maxima, then the chunks' candidates above the row's bound, then one
        program per row selecting among them; ``split.row_bound`` gives the sizes."""
        t, n = scores.shape
        sizes = split.row_bound
        keys = max(SMALLEST, next_pow2(split.chunk))
        if keys > RESIDENT_MAX:
            raise ValueError(f"TopkSplit: a row-bound chunk program holds at most {RESIDENT_MAX} keys, "
                             f"this split needs {keys}")
        chunks, groups, listed = split.chunks, sizes.groups(split.chunks, split.chunk, k), sizes.list_keys(k)
        ch_p2, k_p2, cap = next_pow2(chunks), next_pow2(k), min(keys, listed)
        ints = functools.partial(torch.empty, dtype=torch.int32, device=scores.device)
        maxima, finite, per_row = ints(t * chunks * groups), ints(t * chunks), ints(t * 2)  # per row: bound, need
        gt_keys, gt_ids, gt_counts = ints(t * chunks * cap), ints(t * chunks * cap), ints(t * chunks)
        tie_ids, tie_counts = ints(t * chunks * k), ints(t * chunks)
        pdl = dependent_launch(self.policy.dependent_select, scores.device)
        warps = min(32, max(split.num_warps, keys // 1024))
        first, second, third = self.row_bound_kernels
        first[(t, chunks)](scores, maxima, finite, n, split.chunk, KEYS=keys, GROUPS=groups, PDL=pdl, num_warps=warps)
        second[(t, chunks)](scores, maxima, finite, per_row, gt_keys, gt_ids, gt_counts, tie_ids, tie_counts, n,
                            split.chunk, k, cap, k, KEYS=keys, GROUPS=groups, CH_P2=ch_p2, PDL=pdl,
                            num_warps=min(32, max(warps, ch_p2 * groups // 1024)), launch_pdl=pdl)
        third[(t,)](scores, per_row, gt_keys, gt_ids, gt_counts, tie_ids, tie_counts, out, n, chunks, k, cap, k,
                    CH_P2=ch_p2, LOG2_CH=ch_p2.bit_length() - 1, LIST=listed, K_P2=k_p2, BLOCK=sizes.block,
                    FIRST=sizes.first_list_keys(k), PDL=pdl,
                    num_warps=min(32, max(8, listed // 1024, k_p2 // 1024)), launch_pdl=pdl)
        return out

    @staticmethod
    def resident_list(keys: int, k: int) -> int:
        """Candidate-list slots of a resident program over ``keys`` keys: 2k as a power of
        two, at most the program's keys (more candidates run the passes over every key).
        On N(0, 1) scores at the indexer's splits the bound lists 1.26-1.47k keys per chunk
        and per candidate row (benchmarks/results/topk_bound_cpu.md, the bound recomputed
        on the CPU: e.g. 655-728 per chunk of 8,192 at k = 512)."""
        return min(max(SMALLEST, next_pow2(keys)), max(SMALLEST, next_pow2(2 * k)))

    def resident_launch(self, scores: torch.Tensor, scratch: torch.Tensor, slots: int, out: torch.Tensor, k: int,
                        chunk: int, chunks: int, groups: int, num_warps: int, out_scores: torch.Tensor | None = None,
                        id_map: torch.Tensor | None = None,
                        candidates: tuple[torch.Tensor, torch.Tensor, int] | None = None, pdl: bool = False) -> None:
        """One launch of the resident select: ``chunks`` programs per row of ``chunk`` keys,
        k ids per (row, chunk) into ``out`` (scores into ``out_scores``, ids through
        ``id_map`` where given), ``slots`` scratch entries per program; ``groups``
        interleaved groups bound the candidates. ``candidates`` (ids, scores, width): one
        launch for the whole split, the chunks writing there and each row's last program
        selecting its k ids into ``out``. ``pdl``: a split's launches, the second (``id_map``)
        dependent on the first (runtime/kernels/pdl.py). At least one warp per 1,024 keys (32 a thread):
        with 64 a thread the sm_90 code of Triton 3.6 spills more (16,384 keys on 8 warps:
        255 registers and 32-168 bytes of stack; on 16 warps, 128 registers, the most 16
        warps may hold, and 16-72 bytes)."""
        t, n = scores.shape
        keys = max(SMALLEST, next_pow2(chunk))
        cand_keys = max(SMALLEST, next_pow2(candidates[2])) if candidates else SMALLEST
        num_warps = min(32, max(num_warps, keys // 1024, cand_keys // 1024))
        cand_ids, cand_scores = (candidates[0], candidates[1]) if candidates else (out, out)
        count = self.tickets.get(scores.device, t) if candidates else out
        self.resident_kernel[(t, chunks)](
            scores, scratch, out, out if out_scores is None else out_scores, out if id_map is None else id_map,
            cand_ids, cand_scores, count, n, chunk, k, slots, KEYS=keys, GROUPS=min(groups, keys),
            LIST=self.resident_list(chunk, k), SCORES=out_scores is not None, MAPPED=id_map is not None,
            TICKET=candidates is not None, CAND_KEYS=cand_keys, CAND_GROUPS=min(groups, cand_keys),
            CAND_LIST=self.resident_list(candidates[2], k) if candidates else SMALLEST, PDL=pdl, num_warps=num_warps,
            launch_pdl=pdl and id_map is not None)

    def layout(self, t: int, chunk: int, chunks: int, groups: int) -> tuple[int, int, int, int]:
        """(groups, scratch entries per program, rows per launch, scratch entries per list)
        of a launch over ``chunks`` chunks of ``chunk`` keys."""
        groups = min(groups, max(RADIX_BINS, next_pow2(chunk)))
        stride = max(chunk, groups)  # a program's scratch holds its group maxima, then its candidates
        rows = max(1, min(t, self.tiling.scratch_entries // (stride * chunks)))
        return groups, stride, rows, rows * chunks * stride

    def select(self, scores: torch.Tensor, out: torch.Tensor, k: int, chunk: int, chunks: int, groups: int,
               num_warps: int, scratch: torch.Tensor | None = None, out_scores: torch.Tensor | None = None,
               id_map: torch.Tensor | None = None, pdl: bool = False) -> None:
        """One launch per slice of rows: ``chunks`` programs per row of ``chunk`` keys each,
        k ids per (row, chunk) into ``out`` [T, chunks x k] (and their scores into
        ``out_scores``); ids read through ``id_map`` [T, N] where given. ``scratch``: int32,
        at least twice the layout's entries (allocated here when None). ``pdl``: a split's
        launches, those of the second (``id_map``) dependent on the kernel before them
        (runtime/kernels/pdl.py: each waits for it, so the chain keeps stream order)."""
        t, n = scores.shape
        groups, stride, rows, entries = self.layout(t, chunk, chunks, groups)
        if scratch is None:
            scratch = torch.empty(2 * entries, dtype=torch.int32, device=scores.device)
        cand_keys, cand_ids = scratch[:entries], scratch[entries: 2 * entries]
        unroll = max(1, min(self.tiling.unroll, -(-chunk // groups)))  # no wholly empty tiles
        extra_scores = out if out_scores is None else out_scores  # unused pointers when not wanted
        extra_map = out if id_map is None else id_map
        for first in range(0, t, rows):  # row slices of contiguous tensors stay contiguous
            last = min(t, first + rows)
            self.kernel[(last - first, chunks)](
                scores[first:last], cand_keys, cand_ids, out[first:last], extra_scores[first:last],
                extra_map[first:last], n, chunk, k, stride, GROUPS=groups, BLOCK=self.tiling.block,
                UNROLL=unroll, SCORES=out_scores is not None, MAPPED=id_map is not None, PDL=pdl,
                num_warps=num_warps, launch_pdl=pdl and id_map is not None)
