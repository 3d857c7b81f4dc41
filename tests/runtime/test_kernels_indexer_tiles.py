"""The fused indexer logits (runtime/kernels/indexer.py) under tilings that give a program
several key tiles, against the reference ``index_logits``; and the tiling policy
(runtime/kernels/indexer_tiles.py) as arithmetic.

A program reads its key tiles up to the last one any of its queries can see and writes the
rest -inf without reading them: the cases put that boundary inside a program's range, at
its start (a program with nothing visible), past the keys (a ragged last tile), and give
some queries nothing visible at all. Without CUDA the kernel runs through the Triton
interpreter (set per test, before the kernel is wrapped), so the shapes are tiny.
"""

from __future__ import annotations

import itertools
import textwrap

import pytest
import torch

from runtime.kernels.indexer_tiles import IndexerPolicy, IndexerTiling
from runtime.kernels.reference import index_logits
from runtime.numerics import Numerics

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
NUM = Numerics()


@pytest.fixture
def fused_with(monkeypatch):
    """policy -> FusedIndexLogits: compiled on CUDA, interpreted without it."""
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.kernels.indexer import FusedIndexLogits

    return FusedIndexLogits


def case(gen, t, n, heads, dim, counts):
    q = torch.randn(t, heads, dim, generator=gen).to(DEVICE)
    head_w = (torch.randn(t, heads, generator=gen) * heads**-0.5).to(DEVICE)
    keys = torch.randn(n, dim, generator=gen).to(DEVICE)
    return q, head_w, keys, torch.tensor(counts, dtype=torch.int64, device=DEVICE)


@pytest.mark.parametrize("read_all", [False, True])
@pytest.mark.parametrize("keys_as_rows", [False, True])
@pytest.mark.parametrize("key_tiles,block_n", [(1, 16), (3, 16), (2, 32)])
@pytest.mark.parametrize("counts", [
    [70, 0, 130],  # the boundary inside a program's range; one query sees nothing
    [48, 33, 17],  # the programs after the first see nothing: every tile of theirs written -inf unread
    [130, 130, 130],  # everything visible; 130 keys leave the last tile ragged
])
def test_several_key_tiles_per_program_match_the_reference(fused_with, gen, key_tiles, block_n, counts, keys_as_rows,
                                                           read_all):
    t, n, heads, dim = len(counts), 130, 4, 32
    args = case(gen, t, n, heads, dim, counts)
    op = fused_with(IndexerPolicy(block_n=block_n, key_tiles=key_tiles, shared_query_rows=8,
                                  keys_as_rows=keys_as_rows, read_all_up_to=t if read_all else 0))
    assert op.policy.tiling(t, heads, n).block_t == 2  # queries split over two row blocks as well
    assert op.policy.tiling(t, heads, n).read_all == read_all
    got = op(*args, NUM).cpu()
    want = index_logits(*args, NUM).cpu()
    seed = gen.initial_seed()
    assert torch.equal(torch.isinf(got), torch.isinf(want)), f"masks differ (seed {seed})"
    fin = torch.isfinite(want)
    assert torch.equal(fin.sum(1), torch.tensor(counts).clamp_max(n)), "the reference's visible keys per query"
    err = (got[fin] - want[fin]).abs().max() / want[fin].abs().max()
    assert err <= 1e-5, f"scores off by {err:.2e} relative (seed {seed})"


@pytest.mark.parametrize("keys_as_rows", [False, True])
def test_reading_every_tile_gives_the_same_bits(fused_with, gen, keys_as_rows):
    """Reading the tiles past every count (``read_all``) only changes which loads wait:
    the scores are the skipping form's bit for bit, -inf where hidden (ragged last tile,
    a query that sees nothing, programs whose keys nobody sees)."""
    counts = [40, 0, 17]
    args = case(gen, len(counts), 130, 4, 32, counts)
    skip, read_all = (fused_with(IndexerPolicy(block_n=16, key_tiles=2, keys_as_rows=keys_as_rows,
                                               read_all_up_to=up_to))(*args, NUM) for up_to in (0, 16))
    assert torch.equal(skip.view(torch.int32), read_all.view(torch.int32)), f"seed {gen.initial_seed()}"


READ_ALL_PTX = textwrap.dedent("""
    from runtime.config import V41Config
    from runtime.kernels.indexer import _index_logits_kernel, launch_kwargs
    from runtime.kernels.indexer_tiles import IndexerPolicy
    from tests.runtime.compile_sm90 import INDEXER_SIGNATURE, compile_sm90, divisible_by_16
    c = V41Config.preset("mid")
    for t, n in ((1, 8192), (1, 131072)):
        for up_to in (0, 16):
            tiles = IndexerPolicy(read_all_up_to=up_to).tiling(t, c.index_n_heads, n)
            kwargs = launch_kwargs(tiles, c.index_n_heads, c.index_head_dim, ieee=False)
            ptx = compile_sm90(_index_logits_kernel, INDEXER_SIGNATURE, kwargs, divisible_by_16(T=t, N=n))
            lines = ptx.asm["ptx"].splitlines()
            branch = next((i for i, line in enumerate(lines) if " bra" in line and line.strip().startswith("@")),
                          len(lines))  # one tile read whole: no branch at all
            wide = sum(("ld.global.v4" in line or "cp.async.cg" in line) for line in lines[:branch])
            print(t, n, int(tiles.read_all), wide, tiles.block_n * c.index_head_dim * 2 // (16 * 32 * tiles.num_warps))
""")


@pytest.mark.slow
def test_reading_every_tile_issues_the_first_keys_before_any_branch_on_sm90(run_sm90_script):
    """What ``read_all`` is for, read from the sm_90 PTX of ``mid`` decode launches (8k keys:
    one tile per program; 128k: eight): with the skipping form no 16-byte load (queries,
    keys) comes before the first conditional branch (on the counts), with ``read_all`` at
    least a key tile's worth of them do (16 bytes per thread per load)."""
    stdout = run_sm90_script(READ_ALL_PTX)
    for line in stdout.strip().splitlines()[-4:]:
        t, n, read_all, wide, tile_loads = (int(x) for x in line.split())
        assert (wide >= tile_loads) if read_all else (wide == 0), stdout


KEYS = [1, 63, 64, 65, 8192, 65536, 131072, 1 << 20]
ROWS = [1, 2, 8, 16, 17, 512, 4096]


@pytest.mark.parametrize("policy", [IndexerPolicy(), IndexerPolicy(programs=64, max_key_tiles=32),
                                    IndexerPolicy(key_tiles=5, block_n=128), IndexerPolicy(read_all_up_to=16)])
def test_every_tiling_covers_the_keys_and_keeps_its_bounds(policy):
    for t, n, heads in itertools.product(ROWS, KEYS, (16, 32)):
        tiles = policy.tiling(t, heads, n)
        where = f"t={t} n={n} heads={heads}: {tiles}"
        rows, programs = tiles.grid(t, n)
        assert (rows - 1) * tiles.block_t < t <= rows * tiles.block_t, where
        span = tiles.block_n * tiles.key_tiles
        assert (programs - 1) * span < n <= programs * span, where  # no program without keys
        if policy.key_tiles:
            assert tiles.key_tiles == policy.key_tiles, where
        else:
            assert 1 <= tiles.key_tiles <= policy.max_key_tiles, where
            if tiles.key_tiles > 1:  # more tiles per program only while the programs stay at the target
                assert rows * (-(-n // tiles.block_n)) >= tiles.key_tiles * policy.programs, where
        if t <= 16:
            assert tiles.block_t * heads <= max(heads, policy.shared_query_rows), where
        assert tiles.read_all == (t <= policy.read_all_up_to), where


def test_the_decode_shapes_tile_as_the_docstring_says():
    """``mid`` (16 index heads) at 8 queries: 128-column products with the keys as rows, one
    warpgroup (4 warps); 128k keys in 8 tiles of 64 per program (256 programs), 64k keys in
    4, 8k keys one tile per program; with the queries as rows a 128-row dot gets 8 warps.
    Calls of up to 8 queries read every key tile; 9 and more skip the ones past the counts."""
    policy = IndexerPolicy()
    assert policy.tiling(8, 16, 131072) == IndexerTiling(8, 64, 8, 4, True, read_all=True)
    assert not policy.tiling(9, 16, 131072).read_all
    assert policy.tiling(8, 16, 131072).grid(8, 131072) == (1, 256)
    assert policy.tiling(1, 16, 65536).key_tiles == 4 and policy.tiling(1, 16, 8192).key_tiles == 1
    assert IndexerPolicy(keys_as_rows=False).tiling(8, 16, 131072).num_warps == 8
    assert IndexerPolicy(keys_as_rows=False).tiling(1, 16, 131072).num_warps == 4
    assert policy.tiling(64, 16, 8192).block_t == 4  # more queries: 64-column products


def test_one_key_tile_against_a_wide_query_tile_takes_eight_warps():
    """8 warps where a program reads one key tile against at least 128 (query, head)
    columns (``mid`` 8 queries or ``flash`` 4 per program at 8k keys), 4 where it loops over
    several tiles (128k keys) or holds fewer columns (1 query); an explicit ``num_warps``
    and the queries-as-rows rule are untouched."""
    policy = IndexerPolicy()
    assert policy.tiling(8, 16, 8192) == IndexerTiling(8, 64, 1, 8, True, read_all=True)
    assert policy.tiling(8, 32, 8192) == IndexerTiling(4, 64, 1, 8, True, read_all=True)
    assert policy.tiling(8, 16, 131072).num_warps == 4 and policy.tiling(8, 16, 131072).key_tiles == 8
    assert policy.tiling(1, 16, 8192).num_warps == 4 and policy.tiling(1, 32, 8192).num_warps == 4
    assert policy.tiling(512, 16, 8192).num_warps == 4  # 64-column products
    assert IndexerPolicy(one_tile_warps=4).tiling(8, 16, 8192).num_warps == 4
    assert IndexerPolicy(one_tile_columns=256).tiling(8, 16, 8192).num_warps == 4
    assert IndexerPolicy(num_warps=2).tiling(8, 16, 8192).num_warps == 2
    assert IndexerPolicy(keys_as_rows=False).tiling(8, 16, 8192).num_warps == 8


@pytest.mark.parametrize("field,value,message", [
    ("block_n", 48, "IndexerPolicy.block_n: expected a power of two >= 16"),
    ("block_n", 8, "IndexerPolicy.block_n: expected a power of two >= 16"),
    ("num_warps", 3, "IndexerPolicy.num_warps: expected 0"),
    ("programs", 0, "IndexerPolicy.programs: expected >= 1, got 0"),
    ("key_tiles", -1, "IndexerPolicy.key_tiles: expected >= 0"),
    ("read_all_up_to", -1, "IndexerPolicy.read_all_up_to: expected >= 0"),
    ("one_tile_warps", 0, "IndexerPolicy.one_tile_warps: expected a power of two of 1-16, got 0"),
    ("one_tile_warps", 6, "IndexerPolicy.one_tile_warps: expected a power of two of 1-16, got 6"),
    ("one_tile_columns", 0, "IndexerPolicy.one_tile_columns: expected >= 1, got 0"),
])
def test_bad_policies_are_refused_with_the_field_named(field, value, message):
    with pytest.raises(ValueError, match=message):
        IndexerPolicy(**{field: value})
