"""The Triton top-k (runtime/kernels/topk.py) against an independent oracle: a float64
numpy lexsort (score descending, then index ascending), the first k ids whose score is
> -inf, sorted ascending and padded with -1. That is the reference's rule written as a
full stable sort, so agreement is exact id for id, ties included; the reference op
(``topk_entries``, a torch.topk threshold) is checked against the same oracle.

Without CUDA the kernel runs in Triton's interpreter on small rows, with a small tiling
(32 groups, 32-element steps) so that every path of the kernel runs: several groups per
row, a candidate list longer than one step, the fallback when fewer groups than k hold a
finite score. With CUDA the same checks run at the indexer's real shapes (N = 131072).
Seeds are drawn fresh every run and printed in every failure message.

Every test taking the ``topk`` fixture runs four times: with the chained select
(``_topk_kernel``), with the register-resident one (runtime/kernels/topk_resident.py), the
latter as a policy that gives every row one resident program (rows up to 1,024 keys) and as
the resident twin of every forced split, in two launches and in one, and with the row-bound
select (runtime/kernels/topk_rowbound.py) as a policy that splits every row of more than 32
keys (k permitting) and as the row-bound twin of every forced split, with sizes small
enough (2k maxima, a 2k-key candidate tile) that rows take each of its last launch's paths.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import torch

from runtime.kernels.reference import REFERENCE_OPS

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
NEG_INF = float("-inf")


ROW_BOUND_SMALL = dict(maxima_per_k=2, list_per_k=2)  # RowBound's sizes in the "row bound" tests


@pytest.fixture(params=["chained", "resident", "resident one launch", "row bound"])
def topk(monkeypatch, request):
    """FusedTopk with the small tiling: compiled on CUDA, interpreted on CPU (the variable
    is set before the kernel is wrapped, for this test only). "resident": whole rows of up
    to 1,024 keys in one resident program each, and forced splits resident too
    (``split_of``); "resident one launch": those splits in one launch (a ticket); "row
    bound": rows split into chunks of 32 keys wherever the policy's shrink rule allows
    (N >= 2k), run by the row-bound select (its own chunks of 32 keys), and forced splits too."""
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.kernels.topk import FusedTopk, TopkTiling
    from runtime.kernels.topk_tiles import RowBound, SplitRow, TopkSplitPolicy

    if request.param == "chained":
        return FusedTopk(TopkTiling(groups=32, block=32, unroll=3))
    if request.param == "row bound":
        small_chunks = TopkSplitPolicy(min_shrink=1, row_bound=RowBound(**ROW_BOUND_SMALL, block=32, chunk=32,
                                                                         longest=32, programs=1 << 16),
                                       table=(SplitRow(1 << 16, 32, 32),))
        return FusedTopk(TopkTiling(groups=32, block=32, unroll=3), small_chunks)
    whole_rows = TopkSplitPolicy(resident=True, row_bound=None, resident_keys=1024, table=(SplitRow(1 << 16, 1 << 16, 32),),
                                 resident_one_launch=request.param == "resident one launch")
    return FusedTopk(TopkTiling(groups=32, block=32, unroll=3), whole_rows)


@pytest.fixture
def topk_default(monkeypatch):
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.kernels.topk import FusedTopk

    return FusedTopk()


def oracle(scores: torch.Tensor, k: int) -> torch.Tensor:
    values = scores.double().cpu().numpy()
    t, n = values.shape
    out = np.full((t, k), -1, dtype=np.int64)
    for r in range(t):
        order = np.lexsort((np.arange(n), -values[r]))  # last key is the primary one
        chosen = np.sort([i for i in order[:k] if values[r, i] > -np.inf]).astype(np.int64)
        out[r, : len(chosen)] = chosen
    return torch.from_numpy(out)


def check(fn, scores: torch.Tensor, k: int, seed, what: str) -> None:
    scores = scores.to(DEVICE)
    want = oracle(scores, k)
    got = fn(scores, k)
    assert got.dtype == torch.int64 and got.shape == want.shape, f"{what}: {got.dtype} {tuple(got.shape)}"
    got = got.cpu()
    bad = (got != want).any(1).nonzero().flatten().tolist()
    assert not bad, (f"{what}: rows {bad[:5]} differ (seed {seed}); row {bad[0]}: "
                     f"got {got[bad[0]].tolist()[:12]}, want {want[bad[0]].tolist()[:12]}")


def few_values(gen, t, n, levels):
    """Scores drawn from ``levels`` distinct values: most of a row ties with its k-th."""
    table = torch.randn(levels, generator=gen)
    return table[torch.randint(0, levels, (t, n), generator=gen)]


@pytest.mark.parametrize("t,n,k", [(1, 37, 8), (3, 200, 16), (2, 700, 64), (5, 64, 63), (2, 130, 100)])
def test_random_scores_match_the_sort(topk, gen, t, n, k):
    scores = torch.randn(t, n, generator=gen)
    check(topk, scores, k, gen.initial_seed(), "random")
    check(REFERENCE_OPS["topk"], scores, k, gen.initial_seed(), "reference op")


def test_default_tiling_matches_the_sort(topk_default, gen):
    """One group per element (rows shorter than 4096 groups): the bound is exact."""
    scores = torch.randn(3, 300, generator=gen)
    scores[1, 250:] = NEG_INF
    check(topk_default, scores, 32, gen.initial_seed(), "default tiling")


@pytest.mark.parametrize("levels", [3, 4, 5])
@pytest.mark.parametrize("k", [1, 16, 90])
def test_heavy_ties_go_to_the_lowest_indices(topk, gen, levels, k):
    scores = few_values(gen, 4, 300, levels)
    check(topk, scores, k, gen.initial_seed(), f"{levels} values")
    check(REFERENCE_OPS["topk"], scores, k, gen.initial_seed(), "reference op, ties")


def test_ties_straddling_the_kth_with_relu_zeros(topk, gen):
    """Mostly exact zeros (a ReLU'd score), the k-th value among them."""
    scores = torch.relu(torch.randn(3, 400, generator=gen) - 1.5)
    check(topk, scores, 120, gen.initial_seed(), "relu zeros")


def test_all_equal_row(topk):
    check(topk, torch.full((2, 150), 0.25), 40, None, "all equal")


def test_fewer_groups_than_k_with_finite_scores(topk, gen):
    """k = 100 > 32 groups: the group maxima cannot bound v; every finite score is a
    candidate (the kernel's fallback)."""
    scores = torch.randn(2, 250, generator=gen)
    check(topk, scores, 100, gen.initial_seed(), "k > groups")


def test_best_scores_in_one_group(topk, gen):
    """Group 0 (positions 0, 32, 64, ...) holds the 10 best scores: one group maximum
    stands for all of them, so the bound comes from the other groups' maxima."""
    scores = torch.rand(2, 320, generator=gen)
    scores[:, 0::32] += 10.0 + torch.arange(10.0)
    scores[1] = scores[1].flip(0)
    check(topk, scores, 20, gen.initial_seed(), "one group")


def test_neg_inf_never_picked_and_padding(topk, gen):
    scores = torch.randn(5, 90, generator=gen)
    scores[0] = NEG_INF  # nothing finite
    scores[1, 5:] = NEG_INF  # 5 finite < k
    scores[2, ::2] = NEG_INF  # 45 finite > k
    scores[3, :80] = NEG_INF  # 10 finite, at the row's end
    scores[4, 7] = float("inf")  # +inf is a score like any other
    check(topk, scores, 16, gen.initial_seed(), "-inf")


def test_minus_zero_ties_with_plus_zero(topk, gen):
    """-0.0 == +0.0 in the reference's comparisons: they tie, the lower index wins."""
    signs = torch.where(torch.rand(2, 100, generator=gen) < 0.5, -1.0, 1.0)
    scores = torch.zeros(2, 100) * signs  # a mix of -0.0 and +0.0
    scores[:, 90:] = torch.randn(2, 10, generator=gen).abs() + 1.0
    scores[1, :40] = -1.0
    assert torch.signbit(scores).any() and (~torch.signbit(scores[:, :90])).any()
    check(topk, scores, 30, gen.initial_seed(), "signed zeros")


def test_signs_and_exponents_far_apart(topk, gen):
    """Negative and positive scores over 60 decades, subnormals included: the key's order
    is the float order across sign and exponent."""
    mags = 10.0 ** (torch.rand(3, 300, generator=gen) * 60 - 30)
    signs = torch.where(torch.rand(3, 300, generator=gen) < 0.5, -1.0, 1.0)
    scores = (mags * signs).float()
    scores[0, :20] = 1e-40  # subnormal
    scores[2] = -scores[2].abs()  # all negative
    check(topk, scores, 50, gen.initial_seed(), "signs/exponents")


@pytest.mark.parametrize("k", [70, 71, 200])
def test_k_at_or_above_the_row_length(topk, gen, k):
    scores = torch.randn(2, 71, generator=gen)
    scores[1, 3] = NEG_INF
    check(topk, scores, k, gen.initial_seed(), f"k={k} >= N")


def test_rows_split_over_launches(monkeypatch, gen):
    """A scratch budget of 2 rows: 7 rows run in 4 launches, each row's ids unchanged."""
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.kernels.topk import FusedTopk, TopkTiling

    scores = torch.randn(7, 60, generator=gen)
    scores[3] = NEG_INF
    check(FusedTopk(TopkTiling(groups=32, block=32, scratch_entries=128)), scores, 12,
          gen.initial_seed(), "split launches")


def test_empty_shapes(topk):
    assert topk(torch.randn(0, 50, device=DEVICE), 8).shape == (0, 8)
    out = topk(torch.empty(3, 0, device=DEVICE), 4)
    assert out.shape == (3, 4) and bool((out == -1).all())
    assert topk(torch.randn(3, 10, device=DEVICE), 0).shape == (3, 0)


def test_tiling_rejects_a_non_power_of_two():
    from runtime.kernels.topk import TopkTiling

    with pytest.raises(ValueError, match="TopkTiling.groups: expected a power of two"):
        TopkTiling(groups=48)
    with pytest.raises(ValueError, match="TopkTiling.unroll: expected >= 1"):
        TopkTiling(unroll=0)


# ---------------------------------------------------------------- rows split over programs
# A split (runtime/kernels/topk_tiles.py) is forced with FusedTopk.run, so every test picks
# its chunk borders; chunks of 40-64 keys and 32 groups keep the interpreter fast.
def split_of(n: int, chunk: int, policy=None):
    """A forced split into chunks of ``chunk`` keys, resident (and in one launch) or
    row-bound as ``policy`` (a TopkSplitPolicy) asks."""
    from runtime.kernels.topk_tiles import TopkSplit

    resident = policy is not None and policy.resident
    return TopkSplit(-(-n // chunk), chunk, 32, resident=resident, one_launch=resident and policy.resident_one_launch,
                     row_bound=None if policy is None else policy.row_bound)


def check_split(topk, scores: torch.Tensor, k: int, chunk: int, seed, what: str) -> None:
    split = split_of(scores.shape[1], chunk, topk.policy)
    check(lambda x, kk: topk.run(x.float().contiguous(), kk, split), scores, k, seed,
          f"{what}, {split.chunks} chunks of {chunk}")


@pytest.mark.parametrize("t,n,k,chunk", [(2, 300, 16, 64), (1, 257, 40, 48)])
def test_split_random_scores_match_the_sort(topk, gen, t, n, k, chunk):
    check_split(topk, torch.randn(t, n, generator=gen), k, chunk, gen.initial_seed(), "random")


def test_split_heavy_ties_across_chunk_borders(topk, gen):
    """Two and four distinct values: the k-th value's ties run through every chunk, and a
    chunk's own top-k keeps ties its row will not take."""
    scores = torch.cat([few_values(gen, 1, 256, 2), few_values(gen, 1, 256, 4)])
    check_split(topk, scores, 50, 64, gen.initial_seed(), "2 and 4 values")


def test_split_equal_runs_over_a_border(topk, gen):
    """Row 0 all equal (the first k ids win, from two chunks); row 1: a run of the best
    value from id 50 to 90 over the border at 64; row 2: the best run in the last chunk."""
    scores = torch.rand(3, 192, generator=gen)
    scores[0] = 0.5
    scores[1, 50:90] = 2.0
    scores[2, 150:] = 2.0
    check_split(topk, scores, 45, 64, gen.initial_seed(), "equal runs")


def test_split_neg_inf_runs_and_short_chunks(topk, gen):
    scores = torch.randn(5, 192, generator=gen)
    scores[0] = NEG_INF  # nothing finite: all -1
    scores[1, :120] = NEG_INF  # the first chunk empty, the k from the last ones
    scores[2, 40:] = NEG_INF  # one chunk with 40 finite < k, the rest empty
    scores[3, ::2] = NEG_INF  # every chunk with fewer finite (32) than k
    scores[4, 64:128] = NEG_INF  # a -inf chunk between finite ones
    check_split(topk, scores, 48, 64, gen.initial_seed(), "-inf")


def test_split_signed_zeros(topk, gen):
    """-0.0 and +0.0 tie in every chunk and in the candidates (the scores written by the
    chunk pass are +0.0), the lower index winning across chunks."""
    signs = torch.where(torch.rand(2, 160, generator=gen) < 0.5, -1.0, 1.0)
    scores = torch.zeros(2, 160) * signs
    scores[:, 150:] = 1.0
    scores[1, :30] = -1.0
    check_split(topk, scores, 70, 40, gen.initial_seed(), "signed zeros")


@pytest.mark.parametrize("k,chunk", [(50, 32), (150, 64)])
def test_split_k_at_or_above_the_chunk_or_row(topk, gen, k, chunk):
    """k > the chunk (every chunk keeps all its keys), k = N = 150 (all of the row)."""
    scores = torch.randn(2, 150, generator=gen)
    scores[1, 70:75] = NEG_INF
    check_split(topk, scores, k, chunk, gen.initial_seed(), f"k={k}")


def test_split_of_one_chunk_equals_the_one_pass_kernel(topk, gen):
    """Both launches of a split over one chunk (the resident select: its one launch) give the
    one-pass kernel's ids (and the sort's)."""
    from runtime.kernels.topk_tiles import ONE_PASS

    scores = few_values(gen, 2, 130, 5)
    scores[1, 100:] = NEG_INF
    one = topk.run(scores, 40, ONE_PASS)
    assert torch.equal(topk.run(scores, 40, split_of(130, 130, topk.policy)), one), \
        f"seed {gen.initial_seed()}"
    check(lambda x, kk: one, scores, 40, gen.initial_seed(), "one pass")


def test_policy_split_through_the_call_in_several_launches(monkeypatch, gen):
    """The registry's path: FusedTopk() with a policy that splits, and a scratch budget of
    one row per launch, so 2 rows of 4 chunks run as 2 + 2 launches."""
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.kernels.topk import FusedTopk, TopkTiling
    from runtime.kernels.topk_tiles import SplitRow, TopkSplitPolicy

    policy = TopkSplitPolicy(min_shrink=2, table=(SplitRow(max_k=32, chunk=64, groups=32),), row_bound=None)
    fused = FusedTopk(TopkTiling(groups=32, block=32, scratch_entries=256), policy)
    assert policy.split(2, 256, 16).chunks == 4
    scores = few_values(gen, 2, 256, 6)
    scores[1, :100] = NEG_INF
    check(fused, scores, 16, gen.initial_seed(), "policy split")


def test_resident_policy_split_through_the_call(monkeypatch, gen):
    """The registry's path with ``resident``: 2 rows of 256 keys in 4 resident chunks of 64,
    then their 4 x 16 candidates; and a row of 256 keys that would not split (the table's
    chunk is the row) in one resident program."""
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.kernels.topk import FusedTopk
    from runtime.kernels.topk_tiles import SplitRow, TopkSplit, TopkSplitPolicy

    split_rows = TopkSplitPolicy(min_shrink=2, resident=True, row_bound=None, resident_keys=64,
                                 table=(SplitRow(max_k=32, chunk=64, groups=32),))
    assert split_rows.split(2, 256, 16) == TopkSplit(4, 64, 32, resident=True)
    whole_row = TopkSplitPolicy(resident=True, row_bound=None, resident_keys=256, table=(SplitRow(max_k=32, chunk=256, groups=32),))
    assert whole_row.split(2, 256, 16) == TopkSplit(1, 256, 32, resident=True)
    scores = few_values(gen, 2, 256, 6)
    scores[1, :100] = NEG_INF
    check(FusedTopk(policy=split_rows), scores, 16, gen.initial_seed(), "resident split")
    check(FusedTopk(policy=whole_row), scores, 16, gen.initial_seed(), "resident whole row")


def test_one_launch_counters_return_to_zero_and_calls_repeat(monkeypatch, gen):
    """The one-launch split's row tickets are left at zero by every call (so they are never
    cleared again): three calls of 4 and 2 rows on the same FusedTopk give the sort's ids
    each time, and every counter reads 0 after each."""
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.kernels.topk import FusedTopk
    from runtime.kernels.topk_tiles import SplitRow, TopkSplit, TopkSplitPolicy

    policy = TopkSplitPolicy(min_shrink=2, resident=True, row_bound=None, resident_keys=64, resident_one_launch=True,
                             table=(SplitRow(max_k=32, chunk=64, groups=32),))
    assert policy.split(4, 256, 16) == TopkSplit(4, 64, 32, resident=True, one_launch=True)
    fused = FusedTopk(policy=policy)
    for rows in (4, 2, 4):
        scores = few_values(gen, rows, 256, 6)
        scores[0, :100] = NEG_INF
        check(fused, scores, 16, gen.initial_seed(), f"one launch, {rows} rows")
        counters = fused.tickets.get(torch.device(DEVICE), rows)
        assert not bool(counters.any()), f"counters left at {counters[:rows].tolist()}"


def test_resident_split_beyond_a_program_is_refused():
    from runtime.kernels.topk import FusedTopk
    from runtime.kernels.topk_tiles import RESIDENT_MAX, TopkSplit

    n = 4 * RESIDENT_MAX
    with pytest.raises(ValueError, match=f"a resident program holds at most {RESIDENT_MAX} keys, this split needs "
                                         f"{2 * RESIDENT_MAX}"):
        FusedTopk().run(torch.zeros(1, n), 4, TopkSplit(2, 2 * RESIDENT_MAX, 32, resident=True))
    with pytest.raises(ValueError, match=f"this split needs {2 * RESIDENT_MAX}"):  # 64 x 512 candidates
        FusedTopk().run(torch.zeros(1, n), 512, TopkSplit(64, RESIDENT_MAX // 16, 32, resident=True))


def test_split_must_cover_the_row():
    from runtime.kernels.topk import FusedTopk
    from runtime.kernels.topk_tiles import TopkSplit

    with pytest.raises(ValueError, match="TopkSplit: 2 chunks of 64 do not cover 200 keys"):
        FusedTopk().run(torch.zeros(1, 200), 4, TopkSplit(2, 64, 32))


COMPILE = textwrap.dedent("""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from runtime.kernels.backend import jit
    from runtime.kernels.topk import CHAINED_HELPERS, _topk_kernel
    chained = jit(_topk_kernel, helpers=CHAINED_HELPERS)
    for scores, mapped, groups in ((False, False, 4096), (True, True, 1024)):
        sig = {"scores_ptr": "*fp32", "cand_key_ptr": "*i32", "cand_id_ptr": "*i32", "out_ptr": "*i64",
               "out_score_ptr": "*fp32", "id_map_ptr": "*i64", "ROW_N": "i32", "CHUNK": "i32", "K": "i32",
               "STRIDE": "i32", "GROUPS": "constexpr", "BLOCK": "constexpr", "UNROLL": "constexpr",
               "SCORES": "constexpr", "MAPPED": "constexpr", "PDL": "constexpr"}
        src = ASTSource(fn=chained, signature=sig,
                        constexprs={"GROUPS": groups, "BLOCK": 1024, "UNROLL": 2, "SCORES": scores,
                                    "MAPPED": mapped, "PDL": False})
        kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})
        print(len(kernel.asm["cubin"]), kernel.asm["ptx"].count("bar.sync"))
    from runtime.kernels.topk_resident import RESIDENT_HELPERS, _topk_resident_kernel
    resident = jit(_topk_resident_kernel, helpers=RESIDENT_HELPERS)
    for keys, groups, scores, mapped, ticket, warps in ((8192, 1024, True, False, False, 8),
                                                        (16384, 4096, False, True, False, 16),
                                                        (8192, 1024, False, False, True, 8)):
        constexprs = {"KEYS": keys, "GROUPS": groups, "LIST": groups, "SCORES": scores, "MAPPED": mapped,
                      "TICKET": ticket, "CAND_KEYS": 8192, "CAND_GROUPS": 1024, "CAND_LIST": 1024, "PDL": False}
        sig = {"scores_ptr": "*fp32", "scratch_ptr": "*i32", "out_ptr": "*i64", "out_score_ptr": "*fp32",
               "id_map_ptr": "*i64", "cand_ptr": "*i64", "cand_score_ptr": "*fp32", "count_ptr": "*i32",
               "ROW_N": "i32", "CHUNK": "i32", "K": "i32", "SCRATCH": "i32", **dict.fromkeys(constexprs, "constexpr")}
        src = ASTSource(fn=resident, signature=sig, constexprs=constexprs)
        kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
        print(len(kernel.asm["cubin"]), kernel.asm["ptx"].count("bar.sync"))
""")


@pytest.mark.slow
def test_compiles_for_sm90_without_a_gpu(run_sm90_script):
    """The interpreter runs code the compiler refuses (a plain global int read in the
    kernel, a constexpr re-bound in an unrolled loop: both met while writing it), so the
    kernel is also compiled to a Hopper cubin with Triton's bundled ptxas, twice: the
    one-pass form, and one with both of a split's branches on (writing scores, reading ids
    through the map; each launch of a split has one of them); then the resident select's
    two launches and its one-launch form (a ticket) at the indexer's sizes (its helpers
    bound as FusedTopk binds them). In a fresh process (tests/runtime/conftest.py's
    ``run_sm90_script``)."""
    stdout = run_sm90_script(COMPILE)
    variants = [tuple(int(x) for x in line.split()) for line in stdout.strip().splitlines()[-5:]]
    assert len(variants) == 5 and all(cubin > 0 and barriers > 0 for cubin, barriers in variants), stdout


# ---------------------------------------------------------------------------- GPU, real shapes
@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("t,k", [(1, 512), (2, 1024), (8, 2048), (64, 512)])
def test_indexer_shapes_gpu(topk_default, gen, t, k):
    """FusedTopk() as the registry builds it: T = 1-8 split (topk_tiles.py), T = 64 too
    (4 chunks at k = 512)."""
    n = 131072
    scores = torch.randn(t, n, generator=gen)
    visible = torch.randint(n // 2, n + 1, (t,), generator=gen)
    visible[0] = n
    scores[torch.arange(n)[None, :] >= visible[:, None]] = NEG_INF  # causal tails
    check(topk_default, scores, k, gen.initial_seed(), f"gpu T={t}")
    check(topk_default, few_values(gen, t, n, 4), k, gen.initial_seed(), f"gpu ties T={t}")
    check(topk_default, torch.relu(scores - 2.0), k, gen.initial_seed(), f"gpu relu T={t}")


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("chunk,groups", [(4096, 1024), (32768, 4096), (131072, 4096)])
def test_forced_splits_gpu(topk_default, gen, chunk, groups):
    """Splits the policy does not choose, one chunk included, at 128k keys with ties."""
    from runtime.kernels.topk_tiles import TopkSplit

    n = 131072
    split = TopkSplit(n // chunk, chunk, groups)
    run = lambda x, k: topk_default.run(x.float().contiguous(), k, split)  # noqa: E731
    for k in (512, 2048):
        check(run, few_values(gen, 2, n, 4), k, gen.initial_seed(), f"gpu {split} ties k={k}")
        check(run, torch.relu(torch.randn(2, n, generator=gen) - 2.0), k, gen.initial_seed(),
              f"gpu {split} relu k={k}")


RESIDENT_SPLITS = [(1, 131072, 512), (2, 131072, 1024), (8, 131072, 2048), (1, 65536, 512)]


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("t,n,k,one_launch", [(*shape, one) for shape in RESIDENT_SPLITS for one in (False, True)]
                         + [(64, 131072, 512, False), (3, 8192, 512, False)])
def test_resident_policy_gpu(monkeypatch, gen, t, n, k, one_launch):
    """``TopkSplitPolicy(resident=True, row_bound=None)`` at the indexer's shapes: resident splits (1-8
    rows) in two launches and in one, the chained kernel where chunks outgrow a program
    (64 rows), one resident program per row of 8,192 keys (neither form has a second
    launch to fold there); random scores with causal tails, four values (the bound's list
    overflows: the passes over every key), ReLU zeros."""
    from runtime.kernels.topk import FusedTopk
    from runtime.kernels.topk_tiles import TopkSplitPolicy

    fused = FusedTopk(policy=TopkSplitPolicy(resident=True, row_bound=None, resident_one_launch=one_launch))
    scores = torch.randn(t, n, generator=gen)
    visible = torch.randint(n // 2, n + 1, (t,), generator=gen)
    visible[0] = n
    scores[torch.arange(n)[None, :] >= visible[:, None]] = NEG_INF
    what = f"gpu resident T={t} N={n} k={k} {fused.policy.split(t, n, k)}"
    check(fused, scores, k, gen.initial_seed(), what)
    check(fused, few_values(gen, t, n, 4), k, gen.initial_seed(), f"{what} ties")
    check(fused, torch.relu(scores - 2.0), k, gen.initial_seed(), f"{what} relu")
