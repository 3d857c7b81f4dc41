"""The top-k's row-bound select (runtime/kernels/topk_rowbound.py) beyond what the shared
top-k tests give it (tests/runtime/test_kernels_topk.py runs every top-k test through it
too): each path of its last launch taken on purpose, and shown to be taken by an
independent recompute of the row's bound in torch (benchmarks/topk_bound.py's, which also
counts the keys it lists on N(0, 1) rows); its sizes and policy; its sm_90
compile; the indexer's real shapes on a GPU.

The oracle is test_kernels_topk.py's float64 lexsort (score descending, index ascending).
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from test_kernels_topk import CUDA, NEG_INF, check, few_values  # noqa: E402

from benchmarks.topk_bound import row_bound_path  # noqa: E402


@pytest.fixture
def fused(monkeypatch):
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.kernels.topk import FusedTopk

    return FusedTopk()


def test_each_path_of_the_last_launch(fused):
    """Four rows of 600 keys in chunks of 64 (k = 24, 2k maxima, a 64-key candidate tile),
    one per path: random scores (the passes in registers), ReLU'd ones with fewer than k
    above zero (the k-th ties with the bound: no pass), 200 best keys at the row's start
    (each group's maximum hides the others: more candidates than the tile, passes over the
    row), nothing finite."""
    from runtime.kernels.topk_tiles import RowBound, TopkSplit

    gen = torch.Generator().manual_seed(7)  # rows built to their paths; the recompute checks it
    sizes = RowBound(maxima_per_k=2, list_per_k=2, block=32)
    scores = torch.randn(4, 600, generator=gen)
    scores[1] = torch.relu(scores[1] - 2.0)
    scores[2, :200] += 10.0
    scores[3] = NEG_INF
    paths = [row_bound_path(row, 24, 64, sizes)[1] for row in scores]
    assert paths == ["registers", "ties at the bound", "over the row", "nothing finite"], paths
    split = TopkSplit(10, 64, 32, row_bound=sizes)
    check(lambda x, k: fused.run(x.float().contiguous(), k, split), scores, 24, 7, "row bound paths")


def test_each_path_of_the_last_launch_with_two_tiles(fused):
    """The same five paths with the smaller first tile on (``first_list_per_k``: 64 keys
    at k = 24, the whole tile 128): random scores list about 37 keys (the first tile), the
    row's first 80 keys 3 higher list 95 (the whole tile), 300 best keys at the start more
    than either (over the row), ReLU'd scores and nothing finite as before."""
    from runtime.kernels.topk_tiles import RowBound, TopkSplit

    gen = torch.Generator().manual_seed(7)  # rows built to their paths; the recompute checks it
    sizes = RowBound(maxima_per_k=2, list_per_k=4, block=32, first_list_per_k=2)
    assert (sizes.first_list_keys(24), sizes.list_keys(24)) == (64, 128)
    scores = torch.randn(5, 600, generator=gen)
    scores[1] = torch.relu(scores[1] - 2.0)
    scores[2, :300] += 10.0
    scores[3] = NEG_INF
    scores[4, :80] += 3.0
    paths = [row_bound_path(row, 24, 64, sizes)[1] for row in scores]
    assert paths == ["first tile", "ties at the bound", "over the row", "nothing finite", "registers"], paths
    split = TopkSplit(10, 64, 32, row_bound=sizes)
    check(lambda x, k: fused.run(x.float().contiguous(), k, split), scores, 24, 7, "row bound paths, two tiles")


def test_ties_at_the_bound_past_a_chunks_tie_list(fused, gen):
    """Four values: the k-th value's ties fill whole chunks, so each chunk lists only its
    first k ties and the row's first ties come from the early chunks."""
    from runtime.kernels.topk_tiles import RowBound, TopkSplit

    scores = few_values(gen, 3, 512, 4)
    scores[1, :100] = scores[1].max()  # the best value's run over two chunk borders
    split = TopkSplit(8, 64, 32, row_bound=RowBound(maxima_per_k=1, list_per_k=1, block=32))
    check(lambda x, k: fused.run(x.float().contiguous(), k, split), scores, 40, gen.initial_seed(), "4 values")


def test_the_policy_runs_row_bound_splits_through_the_call(monkeypatch, gen):
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.kernels.topk import FusedTopk
    from runtime.kernels.topk_tiles import RowBound, SplitRow, TopkSplit, TopkSplitPolicy

    bound = RowBound(chunk=128, longest=128)
    policy = TopkSplitPolicy(min_shrink=2, row_bound=bound, table=(SplitRow(max_k=64, chunk=128, groups=32),))
    assert policy.split(2, 700, 48) == TopkSplit(6, 117, 32, row_bound=bound)
    scores = torch.randn(2, 700, generator=gen)
    scores[1, 650:] = NEG_INF
    check(FusedTopk(policy=policy), scores, 48, gen.initial_seed(), "policy row bound")


def test_row_bound_sizes_and_policy():
    from runtime.kernels.topk_tiles import CHAINED, RESIDENT_MAX, RowBound, TopkSplitPolicy

    sizes = RowBound()  # 4 maxima per k, the first tile 2 x k
    assert sizes.groups(16, 8192, 512) == 128  # 2,048 maxima per row over 16 chunks
    assert sizes.groups(13, 8192, 512) == 128  # counted as 16 chunks: the kernel's padded tile
    assert sizes.groups(8, 16384, 2048) == 1024  # 8,192 maxima at most
    assert sizes.groups(4, 40, 512) == 64  # no more groups than the chunk's tile has keys
    eight = RowBound(maxima_per_k=8)
    assert eight.groups(16, 8192, 512) == 256 and eight.groups(8, 16384, 2048) == 1024  # 4,096; 8,192 at most
    assert sizes.list_keys(512) == 4096 and sizes.list_keys(4096) == RESIDENT_MAX
    assert sizes.first_list_keys(512) == 1024 and RowBound(first_list_per_k=0).first_list_keys(512) == 4096
    two = RowBound(first_list_per_k=2)
    assert [two.first_list_keys(k) for k in (8, 300, 512, 2048, 4096)] == [32, 1024, 1024, 4096, 8192]
    assert RowBound(first_list_per_k=1).first_list_keys(300) == 512  # k's power of two at least
    assert RowBound(first_list_per_k=8, list_per_k=2).first_list_keys(512) == 1024  # the whole tile at most
    with pytest.raises(ValueError, match="RowBound.first_list_per_k: expected >= 0"):
        RowBound(first_list_per_k=-1)
    with pytest.raises(ValueError, match="k = 600 does not fit the 512-key candidate tile"):
        RowBound(list_per_k=1, max_list=512).list_keys(600)
    with pytest.raises(ValueError, match="RowBound.maxima_per_k: expected >= 1"):
        RowBound(maxima_per_k=0)
    with pytest.raises(ValueError, match="RowBound.max_list: expected a power of two"):
        RowBound(max_list=1000)
    with pytest.raises(ValueError, match="RowBound.max_list: expected at most 16384"):
        RowBound(max_list=32768)
    with pytest.raises(ValueError, match="at most one of resident and row_bound"):
        TopkSplitPolicy(resident=True, row_bound=RowBound())
    split = TopkSplitPolicy().split(1, 131072, 512)  # on by default, in its own chunks
    assert (split.chunks, split.chunk, split.row_bound) == (32, 4096, RowBound())
    assert CHAINED.split(1, 131072, 512).row_bound is None


def test_a_chunk_beyond_a_program_is_refused(fused):
    from runtime.kernels.topk_tiles import RowBound, TopkSplit

    with pytest.raises(ValueError, match="a row-bound chunk program holds at most 16384 keys, this split needs 32768"):
        fused.run(torch.zeros(1, 65536), 8, TopkSplit(2, 32768, 32, row_bound=RowBound()))


COMPILE = textwrap.dedent("""
    from runtime.kernels.backend import jit
    from runtime.kernels.topk_rowbound import (ROW_BOUND_HELPERS, _row_candidates_kernel, _row_maxima_kernel,
                                               _row_select_kernel)
    from tests.runtime.compile_sm90 import (ROW_CANDIDATES_SIGNATURE, ROW_MAXIMA_SIGNATURE, ROW_SELECT_SIGNATURE,
                                            compile_sm90)
    # (chunk tile, groups, chunks, candidate tile, k, warps): k = 512 and k = 2,048 at 128k keys
    for keys, groups, chunks, listed, k, warps in ((8192, 256, 16, 4096, 512, 8), (16384, 1024, 8, 16384, 2048, 16)):
        for pdl in (False, True):
            for kernel, sig, kwargs in (
                    (_row_maxima_kernel, ROW_MAXIMA_SIGNATURE, dict(KEYS=keys, GROUPS=groups)),
                    (_row_candidates_kernel, ROW_CANDIDATES_SIGNATURE, dict(KEYS=keys, GROUPS=groups, CH_P2=chunks)),
                    (_row_select_kernel, ROW_SELECT_SIGNATURE,
                     dict(CH_P2=chunks, LOG2_CH=chunks.bit_length() - 1, LIST=listed, K_P2=k, BLOCK=1024))):
                compiled = compile_sm90(jit(kernel, helpers=ROW_BOUND_HELPERS), sig,
                                        dict(**kwargs, PDL=pdl, num_warps=warps))
                ptx = compiled.asm["ptx"]
                print(len(compiled.asm["cubin"]), ptx.count("griddepcontrol.wait"),
                      ptx.count("griddepcontrol.launch_dependents"))
""")


@pytest.mark.slow
def test_compiles_for_sm90_without_a_gpu(run_sm90_script):
    """The three launches compiled to Hopper cubins with Triton's bundled ptxas (the
    interpreter accepts what the compiler refuses), at the indexer's splits of 128k keys
    (16 chunks of 8,192 at k = 512; 8 of 16,384 at k = 2,048, the largest tiles), without
    and with dependent launches: B waits for A and lets C launch, C waits for B, A only
    lets B launch."""
    lines = run_sm90_script(COMPILE).strip().splitlines()[-12:]
    got = [tuple(int(x) for x in line.split()) for line in lines]
    assert all(cubin > 0 for cubin, _, _ in got), lines
    assert [(wait, trigger) for _, wait, trigger in got] == ([(0, 0)] * 3 + [(0, 1), (1, 1), (1, 0)]) * 2, lines


# ---------------------------------------------------------------------------- GPU, real shapes
@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("t,n,k", [(1, 131072, 512), (2, 131072, 1024), (8, 131072, 2048), (1, 65536, 512)])
def test_row_bound_policy_gpu(gen, t, n, k):
    """``TopkSplitPolicy()`` (the row-bound select) at the indexer's split shapes, with and
    without dependent launches, with one candidate tile and with the smaller first one, and
    with 4 group maxima per k (the default since session 28) beside 8:
    random scores with causal tails (the passes in registers, in the first tile when on),
    the row's last 4,096 keys 3 standard deviations higher (past the first tile, within
    the whole one at k = 512), four values and ReLU zeros (ties at the bound), the row's
    last 16,384 keys 6 standard deviations higher (a recent window scoring high: more
    candidates than the 8k-key tile, the passes over the row)."""
    from runtime.kernels.topk import FusedTopk
    from runtime.kernels.topk_tiles import RowBound, TopkSplitPolicy

    scores = torch.randn(t, n, generator=gen)
    visible = torch.randint(n // 2, n + 1, (t,), generator=gen)
    visible[0] = n
    scores[torch.arange(n)[None, :] >= visible[:, None]] = NEG_INF
    recent = torch.randn(t, n, generator=gen)
    recent[:, -16384:] += 6.0
    window = torch.randn(t, n, generator=gen)
    window[:, -4096:] += 3.0
    for pdl, first, maxima in ((False, 0, 8), (True, 0, 8), (False, 2, 8), (True, 2, 8), (True, 2, 4)):
        sizes = RowBound(first_list_per_k=first, maxima_per_k=maxima)
        fused = FusedTopk(policy=TopkSplitPolicy(dependent_select=pdl, row_bound=sizes))
        what = f"gpu row bound T={t} N={n} k={k} pdl={pdl} {fused.policy.split(t, n, k)}"
        check(fused, scores, k, gen.initial_seed(), what)
        check(fused, window, k, gen.initial_seed(), f"{what} window")
        check(fused, few_values(gen, t, n, 4), k, gen.initial_seed(), f"{what} ties")
        check(fused, torch.relu(scores - 2.0), k, gen.initial_seed(), f"{what} relu")
        check(fused, recent, k, gen.initial_seed(), f"{what} recent window")
