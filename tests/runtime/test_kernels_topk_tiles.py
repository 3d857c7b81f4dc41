"""The top-k split policy (runtime/kernels/topk_tiles.py) keeps the promises of its
docstring on the indexer's shapes and on odd ones. Pure arithmetic: the kernel's exactness
under any split is tests/runtime/test_kernels_topk.py."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from runtime.kernels.backend import next_pow2
from runtime.kernels.topk_tiles import (
    CHAINED,
    ONE_PASS,
    SPLIT_TABLE,
    RowBound,
    SplitRow,
    TopkSplit,
    TopkSplitPolicy,
)

ROWS = [1, 2, 3, 4, 8, 16, 17, 64, 65, 128, 300, 4096]
KEYS = [1, 31, 100, 4096, 8191, 8192, 8193, 65536, 100_003, 131072, 1 << 20]
KS = [1, 32, 512, 513, 1024, 2048, 2049]
POLICIES = [CHAINED, replace(CHAINED, programs=1000, min_shrink=1),
            replace(CHAINED, programs=64, table=(SplitRow(max_k=64, chunk=32, groups=32),))]


@pytest.mark.parametrize("policy", POLICIES)
def test_every_chained_split_covers_the_row_and_keeps_its_bounds(policy):
    for t, n, k in itertools.product(ROWS, KEYS, KS):
        split = policy.split(t, n, k)
        where = f"t={t} n={n} k={k}: {split}"
        if split == ONE_PASS:
            continue
        row = policy.row_for(k)
        assert row is not None and (split.groups, split.num_warps) == (row.groups, row.num_warps), where
        assert split.chunks >= 2, where
        assert (split.chunks - 1) * split.chunk < n <= split.chunks * split.chunk, where  # no empty chunk
        assert t * split.chunks <= policy.programs, where
        assert split.candidates(k) * policy.min_shrink <= n, where
        assert split.chunks <= -(-n // row.chunk), where  # never more chunks than the table's length gives
        if t * -(-n // row.chunk) <= policy.programs and -(-n // row.chunk) * k * policy.min_shrink <= n:
            assert split.chunk <= row.chunk, where  # neither cap binds: the table's length


@pytest.mark.parametrize("bound", [RowBound(), RowBound(chunk=1024, programs=64, longest=4096)])
def test_row_bound_splits_are_cut_by_their_own_rule_where_the_chained_rule_splits(bound):
    """Where the chained policy splits, the row-bound policy takes the most chunks that its
    chunk length and program cap allow (found by a search here), if that is at least 2
    chunks of at most ``longest`` keys; otherwise, and wherever the chained policy does not
    split, exactly the chained policy's split."""
    policy = TopkSplitPolicy(row_bound=bound)
    for t, n, k in itertools.product(ROWS, KEYS, KS):
        got, chained = policy.split(t, n, k), CHAINED.split(t, n, k)
        where = f"t={t} n={n} k={k}: {got}"
        counts = [c for c in range(2, bound.programs + 1) if t * c <= bound.programs and (c - 1) * bound.chunk < n]
        chunk = -(-n // max(counts)) if counts and chained != ONE_PASS else None
        if chunk is None or chunk > bound.longest:
            assert got == chained, where
            continue
        row = policy.row_for(k)
        assert got == TopkSplit(-(-n // chunk), chunk, row.groups, row.num_warps, row_bound=bound), where
        assert (got.chunks - 1) * got.chunk < n <= got.chunks * got.chunk and t * got.chunks <= bound.programs, where


def test_the_row_bound_defaults_at_the_indexer_shapes():
    """flash's k = 512 at 128k keys: 32 chunks of 4,096 at 1-4 rows, 16 of 8,192 at 8 (128
    programs), the chained split from 16 rows (its chunks would pass 8,192 keys); every k
    of the table the same way; 64k keys 16 chunks up to 8 rows."""
    policy = TopkSplitPolicy()
    assert policy.row_bound == RowBound() and CHAINED.row_bound is None
    assert [(policy.split(t, 131072, 512).chunks, policy.split(t, 131072, 512).row_bound is not None)
            for t in (1, 2, 4, 8, 16, 64)] == [(32, True), (32, True), (32, True), (16, True), (16, False), (4, False)]
    assert all(policy.split(1, 131072, k).chunk == 4096 for k in (512, 1024, 2048))
    assert [policy.split(t, 65536, 512).chunks for t in (1, 2, 4, 8)] == [16] * 4
    assert policy.split(16, 131072, 512) == CHAINED.split(16, 131072, 512)
    with pytest.raises(ValueError, match=r"RowBound: expected chunk <= longest <= 16384"):
        RowBound(chunk=8192, longest=4096)
    with pytest.raises(ValueError, match=r"RowBound.programs: expected >= 1"):
        RowBound(programs=0)
    with pytest.raises(ValueError, match=r"pass row_bound=None with resident=True"):
        TopkSplitPolicy(resident=True)


def test_the_indexer_shapes_split_as_the_table_says():
    """The chained split: flash's k = 512 at 128k keys: 16 chunks of 8192 at batch 1-16,
    fewer as rows grow, none once the rows alone fill the programs; k = 2048 in chunks of
    16384."""
    policy = CHAINED
    assert [policy.split(t, 131072, 512).chunks for t in (1, 2, 4, 8, 16, 64, 128, 256)] == \
        [16, 16, 16, 16, 16, 4, 2, 1]
    assert policy.split(1, 131072, 512).chunk == 8192
    assert policy.split(1, 131072, 2048).chunk == 16384 and policy.split(1, 65536, 2048).chunks == 4
    assert policy.split(1, 8192, 512) == ONE_PASS  # one chunk's worth of keys
    assert policy.split(1, 131072, 4096) == ONE_PASS  # above the table
    assert TopkSplitPolicy(programs=0).split(1, 131072, 512) == ONE_PASS  # row-bound too


def test_the_table_is_valid_and_bad_rows_are_refused():
    assert [r.max_k for r in SPLIT_TABLE] == sorted(r.max_k for r in SPLIT_TABLE)
    with pytest.raises(ValueError, match="SplitRow.chunk: expected a power of two >= 32, got 1000"):
        SplitRow(max_k=8, chunk=1000, groups=32)
    with pytest.raises(ValueError, match="SplitRow.num_warps: expected a power of two of 1-32, got 6"):
        SplitRow(max_k=8, chunk=64, groups=32, num_warps=6)
    with pytest.raises(ValueError, match="ascending, distinct max_k"):
        TopkSplitPolicy(table=(SplitRow(64, 64, 32), SplitRow(32, 64, 32)))
    with pytest.raises(ValueError, match="programs >= 0 and min_shrink >= 1"):
        TopkSplitPolicy(min_shrink=0)


@pytest.mark.parametrize("one_launch", [False, True])
@pytest.mark.parametrize("resident_keys", [32, 1024, 16384])
def test_resident_splits_are_the_same_splits_where_they_fit(resident_keys, one_launch):
    """``resident`` changes which kernel runs, never where a row is cut: every split that
    fits one resident program per chunk and per candidate row is marked resident (and one
    launch, when asked), every other one is the plain policy's; a row the plain policy
    would not split runs as one resident program when it fits."""
    plain = CHAINED
    resident = replace(CHAINED, resident=True, resident_keys=resident_keys, resident_one_launch=one_launch)
    for t, n, k in itertools.product(ROWS, KEYS, KS):
        want, got = plain.split(t, n, k), resident.split(t, n, k)
        where = f"t={t} n={n} k={k} keys={resident_keys}: {got}"
        if want == ONE_PASS:
            fits = plain.row_for(k) is not None and 0 < n <= resident_keys
            row = plain.row_for(k)
            assert got == (TopkSplit(1, n, row.groups, row.num_warps, resident=True) if fits else ONE_PASS), where
            continue
        fits = next_pow2(want.chunk) <= resident_keys and next_pow2(want.candidates(k)) <= resident_keys
        assert got == replace(want, resident=fits, one_launch=fits and one_launch), where


def test_the_indexer_shapes_run_resident_when_asked():
    """128k keys: k = 512 / 1024 / 2048 all fit (chunks of 8,192 / 16,384, candidate rows of
    8,192 / 8,192 / 16,384); at 64 rows the chunks grow to 32,768 and the chained select runs."""
    policy = replace(CHAINED, resident=True)
    assert all(policy.split(t, 131072, k).resident for t in (1, 2, 8, 16) for k in (512, 1024, 2048))
    assert policy.split(64, 131072, 512) == CHAINED.split(64, 131072, 512)
    assert policy.split(64, 131072, 512).chunk == 32768
    assert policy.split(1, 8192, 512) == TopkSplit(1, 8192, 1024, 8, resident=True)
    assert policy.split(1, 131072, 4096) == ONE_PASS
    assert not any(TopkSplitPolicy().split(t, 131072, 512).resident for t in (1, 8, 64))
    with pytest.raises(ValueError, match="TopkSplitPolicy.resident_keys: expected 32-16384, got 32768"):
        replace(CHAINED, resident_keys=32768)
