"""The fused skinny GEMM (runtime/kernels/skinny.py) against a float64 recompute, and its
tiling policy's arithmetic.

Without CUDA the kernel runs through Triton's interpreter in float32 on small shapes off
every tile boundary, with tilings forced to one split, several splits and one row per
chunk, plain and grouped; it must match the float64 product to float32 rounding. With
CUDA the same at ``mid``'s decode shapes in bf16 (error no more than twice cuBLAS's own
against float64, plus one bf16 ulp of slack) and fp32, and replayed from a CUDA graph
bit for bit equal to its eager launch.
"""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from runtime.kernels.reference import linear
from runtime.kernels.skinny_tiles import SkinnyPolicy, cdiv, split_depth
from runtime.numerics import Numerics

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
# Every plain row count up to 64 through the kernel (the default sends plain calls above
# 16 rows to cuBLAS, a speed choice), with the default tiling, one split, many splits.
ALL_ROWS = SkinnyPolicy(max_rows=64)
POLICIES = {"default": ALL_ROWS, "one split": SkinnyPolicy(max_rows=64, programs=1, programs_one_row=1),
            "fine": SkinnyPolicy(max_rows=64, block_n=16, block_k=16, programs=4096, programs_one_row=4096)}


@pytest.fixture
def skinny(monkeypatch):
    """``make(policy)`` -> a FusedLinear built after TRITON_INTERPRET=1 is set (CPU)."""
    if not CUDA:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.kernels.skinny import FusedLinear

    return FusedLinear


def oracle(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    if w.dim() == 2:
        return x.double() @ w.double().T
    return torch.einsum("rgk,gnk->rgn", x.double(), w.double())


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b).abs().max() / b.abs().max())


@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize("m,n,k", [(1, 48, 200), (1, 16, 8), (3, 40, 96), (17, 33, 64), (64, 20, 300)])
def test_plain_matches_float64(skinny, gen, policy, m, n, k):
    fused = skinny(POLICIES[policy])
    x = torch.randn(m, k, generator=gen)
    w = torch.randn(n, k, generator=gen)
    assert fused.runs_kernel(x, w)
    got = fused(x, w)
    assert got.shape == (m, n) and got.dtype == torch.float32
    assert rel(got, oracle(x, w)) < 2e-6, f"seed {gen.initial_seed()}"


@pytest.mark.parametrize("policy", list(POLICIES))
def test_grouped_and_strided_inputs_match_float64(skinny, gen, policy):
    """wo_a's form: x [R, G, K] as a strided view of the attention output, weight [G, N, K]."""
    fused = skinny(POLICIES[policy])
    base = torch.randn(5, 3 * 72, generator=gen)
    x = base.view(5, 3, 72)[:, :, :70]  # unit K stride, row and group strides of the parent
    w = torch.randn(3, 24, 70, generator=gen)
    got = fused(x, w)
    assert got.shape == (5, 3, 24)
    assert rel(got, oracle(x, w)) < 2e-6, f"seed {gen.initial_seed()}"
    assert torch.allclose(got, linear(x, w), rtol=0, atol=1e-5 * float(got.abs().max()))


def test_leading_dims_and_the_numerics_hook(skinny, gen):
    """Numerics(gemm=...) runs linear and grouped_linear through the kernel with the
    shapes of the plain path."""
    fused = skinny(ALL_ROWS)
    num, plain = Numerics(gemm=fused), Numerics()
    x = torch.randn(2, 3, 64, generator=gen)
    w = torch.randn(40, 64, generator=gen)
    assert num.linear(x, w).shape == plain.linear(x, w).shape == (2, 3, 40)
    assert rel(num.linear(x, w), oracle(x.reshape(-1, 64), w).reshape(2, 3, 40)) < 2e-6
    xg, wg = torch.randn(4, 2, 32, generator=gen), torch.randn(2, 16, 32, generator=gen)
    got, want = num.grouped_linear(xg, wg), plain.grouped_linear(xg, wg)
    assert got.shape == want.shape == (4, 32)
    assert rel(got, oracle(xg, wg).reshape(4, 32)) < 2e-6
    assert Numerics.for_options(True, gemm=fused).gemm is None  # batch-invariant: its own tiles


def test_calls_the_policy_does_not_take_run_the_reference(skinny, gen):
    fused = skinny(SkinnyPolicy(max_rows=4, max_grouped_rows=6, max_n=32, max_weight_bytes=1024))
    x, w = torch.randn(5, 16, generator=gen), torch.randn(8, 16, generator=gen)
    assert not fused.runs_kernel(x, w)  # 5 rows > 4
    assert torch.equal(fused(x, w), linear(x, w))
    xg, wg = torch.randn(5, 2, 16, generator=gen), torch.randn(2, 8, 16, generator=gen)
    assert fused.runs_kernel(xg, wg)  # grouped: up to 6 rows
    big = torch.randn(64, 16, generator=gen)  # 4 KiB > 1 KiB
    assert not fused.runs_kernel(x[:1], big)
    assert torch.equal(fused(x[:1], big), linear(x[:1], big))
    wide = torch.randn(40, 4, generator=gen)  # N = 40 > 32
    assert not fused.runs_kernel(x[:1, :4], wide)
    assert fused(x[:0], w).shape == (0, 8)


def test_counters_return_to_zero_and_grown_ones_stay_alive(skinny, gen):
    fused = skinny(POLICIES["fine"])
    dev = torch.device(DEVICE)
    for m, n in ((1, 32), (3, 200), (1, 32)):
        fused(torch.randn(m, 64, generator=gen).to(DEVICE), torch.randn(n, 64, generator=gen).to(DEVICE))
        assert int(fused.tickets.get(dev, 1).abs().sum()) == 0
    first = fused.tickets.get(dev, 1)
    held = weakref.ref(first)
    grown = fused.tickets.get(dev, 10 * first.numel())
    del first
    gc.collect()
    assert held() is not None and fused.tickets.get(dev, 1) is grown


# ---------------------------------------------------------------- the policy, no kernel
@pytest.mark.parametrize("m,n,k", [(1, 512, 2048), (1, 8192, 512), (8, 2048, 2048), (64, 512, 2048),
                                   (1, 16, 4096), (33, 100, 70)])
def test_policy_tiles_cover_the_call(m, n, k):
    p = SkinnyPolicy()
    t = p.tiling(1, m, n, k)
    assert t.block_m == 1 if m == 1 else (t.block_m >= min(m, 16) and t.block_m in (16, 32, 64))
    assert t.split_k % t.block_k == 0 and t.splits(k) * t.split_k >= k > (t.splits(k) - 1) * t.split_k
    tiles, splits = t.grid(1, m, n, k)
    assert tiles == cdiv(m, t.block_m) * cdiv(n, t.block_n) and 1 <= splits <= p.max_splits
    # split only to reach the program target, never past it by a whole tile row of splits
    if splits > 1:
        assert tiles * (splits - 1) < (p.programs_one_row if m == 1 else p.programs)


def test_split_depth_is_whole_chunks():
    assert split_depth(2048, 128, 4) == 512
    assert split_depth(200, 128, 8) == 128  # two chunks: two splits at most
    assert split_depth(300, 64, 2) == 192  # five chunks in two splits: 3 + 2
    assert split_depth(100, 128, 0) == 128


def test_policy_takes_the_calls_it_was_measured_to_win():
    p = SkinnyPolicy()
    assert p.takes(1, 1, 512, 2 << 20) and p.takes(1, 16, 1024, 4 << 20)
    assert not p.takes(1, 17, 512, 2 << 20) and not p.takes(1, 0, 512, 2 << 20)  # plain: 1-16 rows
    assert p.takes(4, 64, 512, 8 << 20) and not p.takes(4, 65, 512, 8 << 20)  # grouped: up to 64
    assert not p.takes(1, 1, 4096, 8 << 20)  # wq_b-like widths: cuBLAS's tiles spread them already
    assert not p.takes(1, 1, 4096, 530 << 20)  # too large: cuBLAS reads it at the bandwidth


# ---------------------------------------------------------------- GPU
MID_SHAPES = [(1, 512, 2048), (1, 8192, 512), (4, 512, 2048), (1, 2048, 2048), (1, 1024, 2048)]


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
@pytest.mark.parametrize("g,n,k", MID_SHAPES)
@pytest.mark.parametrize("m", [1, 3, 8, 64])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_gpu_mid_shapes_within_cublas_error(skinny, gen, g, n, k, m, dtype):
    fused = skinny(SkinnyPolicy(max_rows=64, max_n=1 << 20))  # every shape through the kernel
    x = torch.randn(m, g, k, generator=gen).to(DEVICE, dtype)
    w = (torch.randn(g, n, k, generator=gen) * k**-0.5).to(DEVICE, dtype)
    if g == 1:
        x, w = x[:, 0], w[0]
    want = oracle(x, w)
    got, ref = fused(x, w), linear(x, w)
    if dtype == torch.float32:
        assert rel(got, want) < 1e-5, f"seed {gen.initial_seed()}"
    else:
        ulp = 2.0**-8 * float(want.abs().max())
        assert float((got.double() - want).abs().max()) <= 2 * float((ref.double() - want).abs().max()) + ulp


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_gpu_graph_replay_equals_eager(skinny, gen):
    fused = skinny(SkinnyPolicy())
    x = torch.randn(1, 2048, generator=gen).to(DEVICE, torch.bfloat16)
    w = torch.randn(512, 2048, generator=gen).to(DEVICE, torch.bfloat16)
    eager = fused(x, w)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fused(x, w)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fused(x, w)
    for _ in range(3):
        graph.replay()
        assert torch.equal(out, eager)
