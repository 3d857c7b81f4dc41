"""The top-k's row-bound select: a split row's top-k (``runtime/kernels/topk.py`` has the
rule) in three launches whose radix passes are 3 over the whole row's group maxima and at
most 7 over the row's last few candidates.

Why a third form. The chained split (``_topk_kernel``, launched twice) and the resident
one both bound each chunk's k-th key by the chunk's own group maxima, so every chunk keeps
its own k candidates, and the second launch selects again among chunks x k of them (8,192
at 128k keys, k = 512): each launch runs a bound (4 or 3 radix passes) and up to 7 exact
passes, all dependent steps of one program, and a chunk program's time is that chain more
than its keys (benchmarks/results/topk_h200_split.md: at 64k keys and k = 512, chunks of
4,096 and 8,192 keys took 29.4 and 29.6 us). Here the bound is the row's, computed once,
so only the row's own candidates (about k of them on tie-free scores) are ever listed:

A. one program per (row, chunk): the chunk's ``GROUPS`` interleaved groups' maxima (as
   order-preserving keys, topk.py's step 1) and its count of finite scores, to scratch.
   No pass.
B. one program per (row, chunk), after A: every program reads all of its row's maxima
   and counts, so each computes the same need = min(k, finite scores) and the same bound
   ``L``, the top 15 bits of the need-th largest maximum (3 radix passes over one
   register tile; the smallest finite key when fewer maxima are finite than need). There
   are need distinct keys at least that maximum, so the need-th largest key V >= L. The
   chunk's keys > L are then listed in index order (keys and ids, ``CAP`` slots), and the
   ids of its first ``TIE_CAP`` = k keys equal to L, with both counts.
C. one program per row, after B, by the count of keys > L over the row (``gt``):
   - gt >= need: V > L, and every key taken is listed. At most ``LIST`` of them: gathered
     into one register tile in index order (the chunks' lists concatenated; a binary
     search over the counts' prefix sums finds each entry's chunk), the 7 passes give V
     and the ties taken, and the ids go out ascending (the resident select's ``_emit``).
     With ``RowBound.first_list_per_k`` on, a row listing at most ``FIRST`` keys runs the
     same steps in a tile of FIRST slots: a pass costs per slot, listed or not, and
     N(0, 1) rows list 595-640 keys at k = 512 (benchmarks/results/topk_bound_cpu.md)
     into a 4,096-slot tile (under ncu on an H100 this launch took 18.9 of the three
     launches' 33.8 us: benchmarks/results/topk_h100_ncu.md);
     More than ``LIST`` (a row whose best keys cluster in few groups): the passes and
     the ids run over the row's scores in memory, ``BLOCK`` keys a step (exact, slower);
   - gt < need: then V == L (V >= L, and fewer than need keys exceed L), so the answer is
     every key > L and the first need - gt keys equal to L in index order: no pass at
     all. A tie taken is among the first need ties of its row, so among its chunk's first
     k: listed. The need ids are sorted ascending in registers (``tl.sort``). This is
     the path of ReLU'd scores with fewer than k above zero.
   - need == 0 (no finite score): -1 everywhere.

Why it is exact: every key the rule takes is >= V >= L, and C selects among exactly the
keys >= L that can be taken (all keys > L when V > L; when V == L all keys > L and every
tie that can be taken), by the same rule (score descending, ties to the lowest index).
Scratch is ``torch.empty``: every slot a program reads was written by an earlier launch of
the same call (maxima and counts for every (row, chunk); list slots below their counts).

What it costs against the chained split: three launches instead of two (with
``TopkSplitPolicy.dependent_select`` the later two launch early, runtime/kernels/pdl.py),
each chunk read twice (A and B, L2-hot), and per row 3 + at most 7 passes instead of
(4 + 7) x 2 in sequence. Whether that is faster is the H200's to say
(``benchmarks/topk.py --row-bound``); ``TopkSplitPolicy.row_bound`` is off until then.

Static sm_90 resources (compiled on a CPU with the H200's Triton 3.6, per thread): at
k = 512 (chunks of 8,192 keys on 8 warps, a 4,096-key candidate tile) A 45 registers, B
193, C 123; at k = 2,048 (16,384 keys on 16 warps, a 16,384-key tile) B and C 128, the
most 16 warps may hold, and no spills. C keeps the listed ids as int32 (stored into the
int64 output): as int64 they spilled 48 bytes at the largest tile. Triton 3.9 spills 32-40
bytes in B and C at the largest tiles.
"""

from __future__ import annotations

import triton.language as tl

from runtime.kernels.pdl import gdc_enter
from runtime.kernels.topk_radix import (
    KEY_NEG_INF,
    RADIX_HELPERS,
    _digit_histogram,
    _keys_of,
    _take_digit,
)
from runtime.kernels.topk_resident import BOUND_PASSES, _emit, _radix_select

ID_SENTINEL = tl.constexpr(0x7FFFFFFF)  # sorts after every id


def _list_place(counts, p, CH_P2: tl.constexpr, LOG2_CH: tl.constexpr):
    """(chunk, offset in that chunk's list) of entry ``p`` of the chunks' lists laid end to
    end, ``counts`` [CH_P2] entries each (0 past the last chunk): a binary search over the
    inclusive prefix sums, one register gather per step."""
    ends = tl.cumsum(counts, axis=0)
    chunk = tl.zeros_like(p)
    for s in tl.static_range(LOG2_CH):
        probe = chunk + (CH_P2 >> (s + 1))
        chunk = tl.where(tl.gather(ends, probe - 1, 0) <= p, probe, chunk)
    return chunk, p - tl.gather(ends - counts, chunk, 0)


def _chunk_keys(scores_ptr, row, ROW_N, base, CHUNK, KEYS: tl.constexpr):
    """The keys of row ``row``'s chunk from ``base`` (CHUNK keys, the last chunk shorter) as
    one [KEYS] tile, -inf's key past its end: A's and B's read of the same chunk."""
    offs = tl.arange(0, KEYS)
    return _keys_of(tl.load(scores_ptr + row * ROW_N + base + offs, mask=offs < tl.minimum(CHUNK, ROW_N - base),
                            other=float("-inf")))


def _select_listed(gt_keys, gt_ids, gt_n, gt, need, dst, K, CAP, TILE: tl.constexpr, CH_P2: tl.constexpr,
                   LOG2_CH: tl.constexpr):
    """C's passes over a row's ``gt`` listed keys (``need`` <= gt <= TILE of them; ``gt_keys``
    / ``gt_ids``: the row's lists, ``CAP`` slots per chunk, ``gt_n`` per chunk) gathered into
    one [TILE] register tile in index order, then its ``need`` ids, ascending, to ``dst``.
    A pass's histogram and the emit's scans cost per slot of the tile, listed or not, so
    the tile is sized to the list (``RowBound.first_list_per_k``)."""
    p = tl.arange(0, TILE)
    valid = p < gt
    c, off = _list_place(gt_n, p, CH_P2, LOG2_CH)
    keys = tl.load(gt_keys + c * CAP + off, mask=valid, other=0).to(tl.uint32, bitcast=True)
    ids = tl.load(gt_ids + c * CAP + off, mask=valid, other=-1)  # int32: stored as int64
    v, left = _radix_select(keys, valid, gt, need, TILE, 7)
    _emit(keys, valid, v, left, need, ids, keys, K, dst, dst, TILE, False)


ROW_BOUND_HELPERS = (*RADIX_HELPERS, _chunk_keys, _list_place, _radix_select, _emit,
                     _select_listed, gdc_enter)  # jitted with each kernel


def _row_maxima_kernel(scores_ptr, maxima_ptr, finite_ptr, ROW_N, CHUNK,
                       KEYS: tl.constexpr, GROUPS: tl.constexpr, PDL: tl.constexpr = False):
    """A: program (r, c) writes the GROUPS interleaved groups' maxima of keys [c x CHUNK,
    (c + 1) x CHUNK) of row r (group j: positions j, j + GROUPS, ...; -inf's key for a group
    with no finite score) to maxima [r, c, GROUPS], and its finite scores' count to
    finite [r, c]. ``PDL``: B, launched dependent on it, may launch from the start."""
    if PDL:
        gdc_enter(False)
    row = tl.program_id(0).to(tl.int64)
    part = tl.program_id(1)
    slot = row * tl.num_programs(1) + part
    keys = _chunk_keys(scores_ptr, row, ROW_N, part * CHUNK, CHUNK, KEYS)  # [KEYS]
    maxima = tl.max(tl.reshape(keys, (KEYS // GROUPS, GROUPS)), axis=0)  # [GROUPS]
    tl.store(maxima_ptr + slot * GROUPS + tl.arange(0, GROUPS), maxima.to(tl.int32, bitcast=True))
    tl.store(finite_ptr + slot, tl.sum((keys > KEY_NEG_INF).to(tl.int32), axis=0))


def _row_candidates_kernel(scores_ptr, maxima_ptr, finite_ptr, row_ptr, gt_key_ptr, gt_id_ptr, gt_count_ptr,
                           tie_id_ptr, tie_count_ptr, ROW_N, CHUNK, K, CAP, TIE_CAP,
                           KEYS: tl.constexpr, GROUPS: tl.constexpr, CH_P2: tl.constexpr,
                           PDL: tl.constexpr = False):
    """B: program (r, c) computes row r's need and bound L from all of A's maxima and
    counts (CH_P2 x GROUPS of them, the chunk count rounded up to a power of two), program
    (r, 0) stores (L, need) to row [r, 0:2] for C, and program (r, c) lists its chunk's keys > L (keys and
    ids, the first CAP of them, in index order) and the ids of its first TIE_CAP keys == L,
    with both counts (all of them). ``PDL``: it waits for A, and lets C launch."""
    if PDL:
        gdc_enter(True)  # A's maxima and counts are complete and visible
        gdc_enter(False)  # C may launch now; it waits for this grid in turn
    row = tl.program_id(0).to(tl.int64)
    part = tl.program_id(1)
    chunks = tl.num_programs(1)
    at = tl.arange(0, CH_P2 * GROUPS)
    maxima = tl.load(maxima_ptr + row * chunks * GROUPS + at, mask=at < chunks * GROUPS,
                     other=KEY_NEG_INF).to(tl.uint32, bitcast=True)  # [CH_P2 * GROUPS]
    ch = tl.arange(0, CH_P2)
    need = tl.minimum(tl.sum(tl.load(finite_ptr + row * chunks + ch, mask=ch < chunks, other=0), axis=0), K)
    found = maxima > KEY_NEG_INF
    n_found = tl.sum(found.to(tl.int32), axis=0)
    prefix, _ = _radix_select(maxima, found, n_found, need, CH_P2 * GROUPS, BOUND_PASSES)
    bound = tl.where(n_found >= need, prefix, KEY_NEG_INF + 1)  # fewer finite maxima: every finite key
    if part == 0:
        tl.store(row_ptr + 2 * row, bound.to(tl.int32, bitcast=True))
        tl.store(row_ptr + 2 * row + 1, need)

    base = part * CHUNK
    keys = _chunk_keys(scores_ptr, row, ROW_N, base, CHUNK, KEYS)  # [KEYS]
    finite = keys > KEY_NEG_INF
    above = finite & (keys > bound)
    tie = finite & (keys == bound)
    counts = tl.cumsum((tie.to(tl.int32) << 16) | above.to(tl.int32), axis=0)  # inclusive; KEYS < 2^16
    at_above = (counts & 0xFFFF) - 1
    at_tie = (counts >> 16) - 1
    slot = row * chunks + part
    ids = base + tl.arange(0, KEYS)
    tl.store(gt_key_ptr + slot * CAP + at_above, keys.to(tl.int32, bitcast=True), mask=above & (at_above < CAP))
    tl.store(gt_id_ptr + slot * CAP + at_above, ids, mask=above & (at_above < CAP))
    tl.store(tie_id_ptr + slot * TIE_CAP + at_tie, ids, mask=tie & (at_tie < TIE_CAP))
    tl.store(gt_count_ptr + slot, tl.sum(above.to(tl.int32), axis=0))
    tl.store(tie_count_ptr + slot, tl.sum(tie.to(tl.int32), axis=0))


def _row_select_kernel(scores_ptr, row_ptr, gt_key_ptr, gt_id_ptr, gt_count_ptr, tie_id_ptr,
                       tie_count_ptr, out_ptr, ROW_N, CHUNKS, K, CAP, TIE_CAP,
                       CH_P2: tl.constexpr, LOG2_CH: tl.constexpr, LIST: tl.constexpr, K_P2: tl.constexpr,
                       BLOCK: tl.constexpr, FIRST: tl.constexpr = 0, PDL: tl.constexpr = False):
    """C: program r writes row r's k ids, ascending, -1 padded, to out [r, K] from B's
    lists and its (L, need) (the module docstring has the three cases). ``FIRST`` (a power
    of two below LIST, else unused): the register tile of rows listing at most that many
    keys. ``PDL``: it waits for B."""
    if PDL:
        gdc_enter(True)
    row = tl.program_id(0).to(tl.int64)
    ch = tl.arange(0, CH_P2)
    ch_ok = ch < CHUNKS
    bound = tl.load(row_ptr + 2 * row).to(tl.uint32, bitcast=True)
    need = tl.load(row_ptr + 2 * row + 1)
    gt_n = tl.load(gt_count_ptr + row * CHUNKS + ch, mask=ch_ok, other=0)  # [CH_P2]
    gt = tl.sum(gt_n, axis=0)
    dst = out_ptr + row * K
    lists = row * CHUNKS * CAP
    if need == 0:
        for start in range(0, K, K_P2):
            pad_at = start + tl.arange(0, K_P2)
            tl.store(dst + pad_at, tl.full((K_P2,), -1, dtype=tl.int64), mask=pad_at < K)
    elif gt < need:
        # V == L: every key > L, then the first need - gt keys == L (index order), sorted
        p = tl.arange(0, K_P2)
        in_gt = p < gt
        c, off = _list_place(gt_n, p, CH_P2, LOG2_CH)
        above_ids = tl.load(gt_id_ptr + lists + c * CAP + off, mask=in_gt, other=ID_SENTINEL)
        tie_n = tl.minimum(tl.load(tie_count_ptr + row * CHUNKS + ch, mask=ch_ok, other=0), TIE_CAP)
        q = p - gt
        in_tie = (q >= 0) & (q < need - gt)
        tc, toff = _list_place(tie_n, q, CH_P2, LOG2_CH)
        tie_ids = tl.load(tie_id_ptr + row * CHUNKS * TIE_CAP + tc * TIE_CAP + toff, mask=in_tie,
                          other=ID_SENTINEL)
        ids = tl.sort(tl.where(in_gt, above_ids, tie_ids))  # [K_P2], the need ids first
        tl.store(dst + p, tl.where(p < need, ids.to(tl.int64), -1), mask=p < K)
    elif gt <= LIST:
        # V > L: the passes over the listed keys (all > L), in one register tile: the
        # smaller FIRST one when they fit it (the usual case), else LIST; a tile is a
        # constexpr, so each size is its own call
        row_keys, row_ids = gt_key_ptr + lists, gt_id_ptr + lists
        if FIRST > 0 and FIRST < LIST:
            if gt <= FIRST:
                _select_listed(row_keys, row_ids, gt_n, gt, need, dst, K, CAP, FIRST, CH_P2, LOG2_CH)
            else:
                _select_listed(row_keys, row_ids, gt_n, gt, need, dst, K, CAP, LIST, CH_P2, LOG2_CH)
        else:
            _select_listed(row_keys, row_ids, gt_n, gt, need, dst, K, CAP, LIST, CH_P2, LOG2_CH)
    else:
        # more candidates than one tile: the same passes and ids over the row's keys > L
        src = scores_ptr + row * ROW_N
        prefix = tl.zeros([], dtype=tl.uint32)
        left = need
        for pas in tl.static_range(7):
            shift = (27 - 5 * pas) * (pas < 6)  # constexpr, from pas: digits of 5 bits, the last of 2
            width = 5 - 3 * (pas == 6)
            hist = tl.zeros((32,), dtype=tl.int32)
            for start in range(0, ROW_N, BLOCK):
                offs = start + tl.arange(0, BLOCK)
                keys = _keys_of(tl.load(src + offs, mask=offs < ROW_N, other=float("-inf")))
                hist += _digit_histogram(keys, keys > bound, prefix, shift, width)  # bound > -inf's key
            prefix, left = _take_digit(hist, left, prefix, shift)
        written = tl.zeros([], dtype=tl.int32)
        ties = tl.zeros([], dtype=tl.int32)
        for start in range(0, ROW_N, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            keys = _keys_of(tl.load(src + offs, mask=offs < ROW_N, other=float("-inf")))
            ok = keys > bound
            tie = ok & (keys == prefix)
            tie_rank = ties + tl.cumsum(tie.to(tl.int32), axis=0) - 1
            picked = ok & ((keys > prefix) | (tie & (tie_rank < left)))
            tl.store(dst + written + tl.cumsum(picked.to(tl.int32), axis=0) - 1, offs.to(tl.int64), mask=picked)
            written += tl.sum(picked.to(tl.int32), axis=0)
            ties += tl.sum(tie.to(tl.int32), axis=0)
        for start in range(0, K, BLOCK):
            pad_at = start + tl.arange(0, BLOCK)
            tl.store(dst + pad_at, tl.full((BLOCK,), -1, dtype=tl.int64), mask=(pad_at >= written) & (pad_at < K))
