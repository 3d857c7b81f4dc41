"""The top-k split policy (runtime/kernels/topk_tiles.py) keeps the promises of its
docstring on the indexer's shapes and on odd ones. Pure arithmetic: the kernel's exactness
under any split is tests/runtime/test_kernels_topk.py."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from runtime.kernels.backend import next_pow2
from runtime.kernels.topk_tiles import ONE_PASS, SPLIT_TABLE, SplitRow, TopkSplit, TopkSplitPolicy

ROWS = [1, 2, 3, 4, 8, 16, 17, 64, 65, 128, 300, 4096]
KEYS = [1, 31, 100, 4096, 8191, 8192, 8193, 65536, 100_003, 131072, 1 << 20]
KS = [1, 32, 512, 513, 1024, 2048, 2049]
POLICIES = [TopkSplitPolicy(), TopkSplitPolicy(programs=1000, min_shrink=1),
            TopkSplitPolicy(programs=64, table=(SplitRow(max_k=64, chunk=32, groups=32),))]


@pytest.mark.parametrize("policy", POLICIES)
def test_every_split_covers_the_row_and_keeps_its_bounds(policy):
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


def test_the_indexer_shapes_split_as_the_table_says():
    """flash's k = 512 at 128k keys: 16 chunks of 8192 at batch 1-16, fewer as rows grow,
    none once the rows alone fill the programs; k = 2048 in chunks of 16384."""
    policy = TopkSplitPolicy()
    assert [policy.split(t, 131072, 512).chunks for t in (1, 2, 4, 8, 16, 64, 128, 256)] == \
        [16, 16, 16, 16, 16, 4, 2, 1]
    assert policy.split(1, 131072, 512).chunk == 8192
    assert policy.split(1, 131072, 2048).chunk == 16384 and policy.split(1, 65536, 2048).chunks == 4
    assert policy.split(1, 8192, 512) == ONE_PASS  # one chunk's worth of keys
    assert policy.split(1, 131072, 4096) == ONE_PASS  # above the table
    assert TopkSplitPolicy(programs=0).split(1, 131072, 512) == ONE_PASS


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
    plain = TopkSplitPolicy()
    resident = TopkSplitPolicy(resident=True, resident_keys=resident_keys, resident_one_launch=one_launch)
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
    policy = TopkSplitPolicy(resident=True)
    assert all(policy.split(t, 131072, k).resident for t in (1, 2, 8, 16) for k in (512, 1024, 2048))
    assert policy.split(64, 131072, 512) == TopkSplitPolicy().split(64, 131072, 512)
    assert policy.split(64, 131072, 512).chunk == 32768
    assert policy.split(1, 8192, 512) == TopkSplit(1, 8192, 1024, 8, resident=True)
    assert policy.split(1, 131072, 4096) == ONE_PASS
    assert not any(TopkSplitPolicy().split(t, 131072, 512).resident for t in (1, 8, 64))
    with pytest.raises(ValueError, match="TopkSplitPolicy.resident_keys: expected 32-16384, got 32768"):
        TopkSplitPolicy(resident_keys=32768)
