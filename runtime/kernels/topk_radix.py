"""The steps of a radix select the top-k kernels share (runtime/kernels/topk.py has the rule
and the kernels): scores as order-preserving keys, one 5-bit digit's histogram, and the
digit that holds the left-th largest key. Plain functions: each kernel's ``backend.jit``
binds them (``RADIX_HELPERS``) as Triton inlines them, so sharing them changes no
kernel's code.
"""

from __future__ import annotations

import triton.language as tl

KEY_NEG_INF = tl.constexpr(0x007FFFFF)  # the key of -inf (bits 0xFF800000 inverted)
RADIX_BINS = 32  # 5-bit digits: the cheapest bits per warp instruction of tl.histogram's ballot lowering


def _keys_of(values):
    """float32 scores -> uint32 keys in float order: -0.0 made +0.0 first (equal floats,
    equal keys), then negative floats' bits inverted and positive ones' sign bit set."""
    bits = (values + 0.0).to(tl.uint32, bitcast=True)
    return tl.where((bits >> 31) != 0, ~bits, bits | 0x80000000)


def _digit_histogram(keys, ok, prefix, SHIFT: tl.constexpr, WIDTH: tl.constexpr):
    """[32] counts of the WIDTH-bit digit at bit SHIFT of the ``ok`` keys whose higher
    digits equal ``prefix``'s. Keys left out are put in bin 0 and taken out of its count
    again, so nothing depends on ``tl.histogram``'s ``mask`` argument (not in every
    Triton)."""
    bins = tl.arange(0, 32)
    if SHIFT + WIDTH < 32:
        ok = ok & ((keys >> (SHIFT + WIDTH)) == (prefix >> (SHIFT + WIDTH)))
    digit = ((keys >> SHIFT) & ((1 << WIDTH) - 1)).to(tl.int32)
    dropped = tl.sum((ok == 0).to(tl.int32), axis=0)
    return tl.histogram(tl.where(ok, digit, 0), 32) - tl.where(bins == 0, dropped, 0)


def _take_digit(hist, left, prefix, SHIFT: tl.constexpr):
    """The digit (at bit SHIFT) whose bin holds the left-th largest of the keys ``hist``
    counts: (``prefix`` with that digit, the keys of that bin still to take). Keys in
    higher bins are all above it."""
    bins = tl.arange(0, 32)
    at_least = tl.sum(hist, axis=0) - tl.cumsum(hist, axis=0) + hist  # keys in bins >= b
    pick = tl.maximum(tl.sum((at_least >= left).to(tl.int32), axis=0) - 1, 0)
    left -= tl.sum(tl.where(bins == pick, at_least - hist, 0), axis=0)
    return prefix | (pick.to(tl.uint32) << SHIFT), left


RADIX_HELPERS = (_keys_of, _digit_histogram, _take_digit)
