"""The top-k's register-resident select: one program holds its whole chunk of keys in
registers (``runtime/kernels/topk.py`` has the rule, the split and why the split is exact).

Why a second kernel. The split top-k at 64k keys took the same time with chunks of 4,096
or 8,192 keys (29.4 / 29.6 us on the H200, benchmarks/results/topk_h200_split.md), and
rows of ties longer (74 us on ~98 % zeros): a program's time is its chain of dependent
steps more than its keys. The chained kernel (``_topk_kernel``) walks 14 of them: a sweep
of the chunk for group maxima, 4 radix passes over the maxima (stored to global scratch),
a second sweep of the chunk copying candidates to a scratch list, 7 passes over that list
and a last sweep writing ids, every pass loading its data from memory again and ending in
block-wide reductions. A chunk of at most ``topk_tiles.RESIDENT_MAX`` keys fits in
registers (8,192 keys on 8 warps: 32 a thread), so here it is read once:

1. keys as in topk.py (order-preserving uint32, -0.0 canonicalised); need = min(k, the
   finite keys);
2. the bound, in registers: the ``GROUPS`` interleaved groups' maxima (a reshape and a
   max), and the top 15 bits of the need-th largest of them (3 radix passes): ``lo``;
   ``need`` distinct keys are at least that large, so every key taken is >= lo;
3. the keys >= lo, in index order, to a ``LIST``-slot scratch list (one scan), read back
   as one register tile, and up to 7 radix passes (5+5+5+5+5+5+2 bits) over it give v,
   the need-th largest key, and ``left``, the keys equal to v that are taken. When more
   than ``LIST`` keys are >= lo (ties at the bound: a row of ReLU zeros) the passes run
   over all the chunk's keys instead. A pass runs only while the prefix's bin holds more
   keys than are still needed: once it holds exactly that many, every key in it is taken
   and lower digits decide nothing, so v keeps zeros there (and, over the list, is lifted
   to lo: keys under lo were never listed);
4. from the registers again: keys above v are taken, and the first ``left`` keys equal to
   v in index order; one scan of a packed count (ties in the high 16 bits, keys above v in
   the low 16) gives each taken key its slot (keys above v before it plus min(ties before
   it, left)), so the ids come out ascending, then -1 up to k.

One launch (``TICKET``, ``TopkSplitPolicy.resident_one_launch``): a split's two launches
as one. Each chunk program writes its candidates, takes a ticket on its row's counter
(``runtime/kernels/tickets.py``), and the row's last program runs steps 1-4 again on the
row's candidates (read through L2) and writes the row's ids: no launch boundary between
the two, at the price of one program per row finishing after its row's others.

Against the chained kernel: the chunk is read once, not twice; the bound's passes and the
list's run on registers (one scratch round trip, for the list); no pass reloads anything.
What it costs: registers (the chunk's keys live through every step), so programs hold at
most ``RESIDENT_MAX`` keys, and a program needs a warp per 1,024 keys (topk.py's
``resident_launch``); the fallback's passes each touch every key of the chunk. Which is
faster is the H200's to say (``benchmarks/topk.py --resident``); the split policy uses it
only when asked (``TopkSplitPolicy.resident``).
"""

from __future__ import annotations

import triton.language as tl

from runtime.kernels.pdl import gdc_enter
from runtime.kernels.topk_radix import KEY_NEG_INF, _keys_of

BOUND_PASSES = tl.constexpr(3)  # 15 bits of the bound: within 1/64 of a binade of the need-th group maximum


def _radix_select(keys, valid, in_bin, left, SIZE: tl.constexpr, PASSES: tl.constexpr):
    """The ``left``-th largest of the ``in_bin`` keys where ``valid`` (uint32 keys, [SIZE]),
    to ``PASSES`` digits (5 bits each from the top, the seventh 2 bits): (prefix, left), the
    prefix with the digits not run zero and ``left`` the keys equal to the prefix's bin
    that are still taken. A pass runs only while the prefix's bin holds more keys than
    are still needed; once it holds exactly that many, every key in it is taken and lower
    digits decide nothing (the module docstring)."""
    bins = tl.arange(0, 32)
    prefix = tl.zeros([], dtype=tl.uint32)
    for p in tl.static_range(PASSES):
        shift = (27 - 5 * p) * (p < 6)  # constexpr, from p
        width = 5 - 3 * (p == 6)
        if in_bin > left:
            match = valid
            if shift + width < 32:
                match = match & ((keys >> (shift + width)) == (prefix >> (shift + width)))
            digit = ((keys >> shift) & ((1 << width) - 1)).to(tl.int32)
            # keys not matching (SIZE - in_bin of them) go to bin 0 and are taken out again
            hist = tl.histogram(tl.where(match, digit, 0), 32) - tl.where(bins == 0, SIZE - in_bin, 0)
            at_least = in_bin - tl.cumsum(hist, axis=0) + hist  # matching keys in bins >= b
            pick = tl.maximum(tl.sum((at_least >= left).to(tl.int32), axis=0) - 1, 0)
            left -= tl.sum(tl.where(bins == pick, at_least - hist, 0), axis=0)
            in_bin = tl.sum(tl.where(bins == pick, hist, 0), axis=0)
            prefix = prefix | (pick.to(tl.uint32) << shift)
    return prefix, left


def _select(values, K, scratch, KEYS: tl.constexpr, GROUPS: tl.constexpr, LIST: tl.constexpr):
    """Steps 1-3 on one tile of scores ``values`` [KEYS] (out of range: -inf): (keys,
    finite, v, left, need). ``scratch``: this program's LIST int32 slots."""
    keys = _keys_of(values)  # [KEYS], float order as uint32 order
    finite = keys > KEY_NEG_INF
    total = tl.sum(finite.to(tl.int32), axis=0)
    need = tl.minimum(total, K)

    # a lower bound of the need-th largest key: the top digits of the need-th largest of
    # the GROUPS interleaved groups' maxima (``need`` distinct keys are at least that large)
    maxima = tl.max(tl.reshape(keys, (KEYS // GROUPS, GROUPS)), axis=0)  # [GROUPS]
    found = maxima > KEY_NEG_INF
    lo, _ = _radix_select(maxima, found, tl.sum(found.to(tl.int32), axis=0), need, GROUPS, BOUND_PASSES)
    take = finite & (keys >= lo)  # every key >= the need-th largest (lo = 0 when too few groups: all)
    count = tl.sum(take.to(tl.int32), axis=0)
    if count <= LIST:  # the exact passes over the candidates, in index order
        slot = tl.cumsum(take.to(tl.int32), axis=0) - 1
        tl.store(scratch + slot, keys.to(tl.int32, bitcast=True), mask=take)
        tl.debug_barrier()  # other threads read what was just stored
        at = tl.arange(0, LIST)
        listed = tl.load(scratch + at, mask=at < count, other=0).to(tl.uint32, bitcast=True)
        v, left = _radix_select(listed, at < count, count, need, LIST, 7)
        # stopped early, v's low digits are zero and every listed key >= v is taken; keys
        # under lo were never listed, and v may be below them: lift it (lo lies in v's bin)
        v = tl.maximum(v, lo)
    else:  # heavy ties at the bound: the passes over every key
        v, left = _radix_select(keys, finite, total, need, KEYS, 7)
    return keys, finite, v, left, need


def _emit(keys, finite, v, left, need, ids, values, K, dst, dst_scores, KEYS: tl.constexpr, SCORES: tl.constexpr):
    """Step 4: the taken keys' ``ids`` (and ``values``, with ``SCORES``) at their slots of
    ``dst`` (``dst_scores``), ascending, then -1 (-inf) up to K."""
    greater = finite & (keys > v)
    tie = finite & (keys == v)
    counts = tl.cumsum((tie.to(tl.int32) << 16) | greater.to(tl.int32), axis=0)  # inclusive, packed
    ties_before = (counts >> 16) - tie.to(tl.int32)
    slot = (counts & 0xFFFF) - greater.to(tl.int32) + tl.minimum(ties_before, left)
    # slot < K holds for every taken key; masked anyway, so a wrong v shows as wrong ids, not
    # as writes past the row
    picked = (greater | (tie & (ties_before < left))) & (slot < K)
    tl.store(dst + slot, ids, mask=picked)
    if SCORES:
        tl.store(dst_scores + slot, values + 0.0, mask=picked)
    offs = tl.arange(0, KEYS)
    for start in range(0, K, KEYS):
        pad_at = start + offs
        pad = (pad_at >= need) & (pad_at < K)
        tl.store(dst + pad_at, tl.full((KEYS,), -1, dtype=tl.int64), mask=pad)
        if SCORES:
            tl.store(dst_scores + pad_at, tl.full((KEYS,), float("-inf"), dtype=tl.float32), mask=pad)


RESIDENT_HELPERS = (_keys_of, _radix_select, _select, _emit, gdc_enter)  # jitted with the kernel (runtime/kernels/backend.py's jit)


def _topk_resident_kernel(scores_ptr, scratch_ptr, out_ptr, out_score_ptr, id_map_ptr, cand_ptr, cand_score_ptr,
                          count_ptr, ROW_N, CHUNK, K, SCRATCH,
                          KEYS: tl.constexpr, GROUPS: tl.constexpr, LIST: tl.constexpr, SCORES: tl.constexpr,
                          MAPPED: tl.constexpr, TICKET: tl.constexpr, CAND_KEYS: tl.constexpr,
                          CAND_GROUPS: tl.constexpr, CAND_LIST: tl.constexpr, PDL: tl.constexpr = False):
    """Program (r, c) selects among keys [c x CHUNK, (c + 1) x CHUNK) of row r (ROW_N keys,
    KEYS >= CHUNK a power of two) and writes k ids to output row r x chunks + c;
    ``SCORES``: also their scores (-inf padded), a split's first launch; ``MAPPED``: ids
    read through ``id_map[r, position]``, a split's second launch over the candidates.
    ``scratch``: SCRATCH int32 per program for the candidate list.

    ``TICKET`` (one launch for a split): the chunk's ids and scores go to the candidate
    rows ``cand`` / ``cand_score`` [rows, chunks x k], the program takes a ticket on its
    row's counter (an acq_rel atomic), and the row's last program selects among the row's
    candidates (CAND_KEYS / CAND_GROUPS / CAND_LIST its tiles, read through L2) and writes
    the row's k ids to ``out`` [rows, k], putting the counter back to 0.

    ``PDL``: a split's second launch (MAPPED) is launched dependent on the first
    (runtime/kernels/pdl.py): the first lets it launch from the start, it waits before any
    load."""
    if PDL:
        gdc_enter(MAPPED)
    row = tl.program_id(0).to(tl.int64)
    part = tl.program_id(1)
    chunks = tl.num_programs(1)
    base = part * CHUNK
    n = tl.minimum(CHUNK, ROW_N - base)
    slot_row = row * chunks + part
    scratch = scratch_ptr + slot_row * SCRATCH
    offs = tl.arange(0, KEYS)
    values = tl.load(scores_ptr + row * ROW_N + base + offs, mask=offs < n, other=float("-inf"))
    keys, finite, v, left, need = _select(values, K, scratch, KEYS, GROUPS, LIST)
    if MAPPED:
        ids = tl.load(id_map_ptr + row * ROW_N + offs, mask=offs < n, other=-1)
    else:
        ids = (base + offs).to(tl.int64)
    if TICKET:
        _emit(keys, finite, v, left, need, ids, values, K, cand_ptr + slot_row * K, cand_score_ptr + slot_row * K,
              KEYS, True)
        tl.debug_barrier()  # every thread's candidates are written before the ticket releases them
        ticket = tl.atomic_add(count_ptr + row, 1, sem="acq_rel")
        if ticket == chunks - 1:  # the row's last program: the others' candidates are visible
            tl.store(count_ptr + row, 0)  # all have taken theirs: reset for the next call
            width = chunks * K
            at = tl.arange(0, CAND_KEYS)
            # .cg: read through L2, never a stale L1 line of another program's candidates
            c_values = tl.load(cand_score_ptr + row * width + at, mask=at < width, other=float("-inf"),
                               cache_modifier=".cg")
            c_ids = tl.load(cand_ptr + row * width + at, mask=at < width, other=-1, cache_modifier=".cg")
            c_keys, c_finite, c_v, c_left, c_need = _select(c_values, K, scratch, CAND_KEYS, CAND_GROUPS,
                                                             CAND_LIST)
            _emit(c_keys, c_finite, c_v, c_left, c_need, c_ids, c_values, K, out_ptr + row * K, out_score_ptr,
                  CAND_KEYS, False)
    else:
        _emit(keys, finite, v, left, need, ids, values, K, out_ptr + slot_row * K, out_score_ptr + slot_row * K,
              KEYS, SCORES)
