"""The "tf32x2" projection's host split of fn (runtime.kernels.mhc.tf32_split), against a
float64 recompute: head and remainder are exact in TF32 (10 stored mantissa bits), the head
is x rounded to the nearest TF32 value (ties away from zero), and head + remainder is
within 2^-22 |x| of x. Pure torch on the CPU."""

from __future__ import annotations

import math

import pytest
import torch

from runtime.kernels.mhc import tf32_split


def nearest_tf32(x: torch.Tensor) -> torch.Tensor:
    """float64 recompute: x rounded to 11 significant bits, ties away from zero."""
    x64 = x.double()
    mant, exp = torch.frexp(x64)  # x = mant * 2^exp, 0.5 <= |mant| < 1
    scaled = mant * 2.0**11
    rounded = torch.sign(scaled) * torch.floor(scaled.abs() + 0.5)
    return torch.ldexp(rounded, exp - 11)


def test_head_and_remainder_are_tf32_and_sum_to_x():
    gen = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(20000, generator=gen) * 10.0 ** torch.randint(-6, 6, (20000,), generator=gen),
                   torch.tensor([0.0, -0.0, 1.0, -1.0, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-12, -(1.0 + 2.0**-11)])])
    head, rest = tf32_split(x)
    for part in (head, rest):
        assert part.dtype == torch.float32
        assert bool(((part.view(torch.int32) & 0x1FFF) == 0).all()), "not exact in TF32"
    assert torch.equal(head.double(), nearest_tf32(x)), "head is not x rounded to nearest TF32"
    err = (head.double() + rest.double() - x.double()).abs()
    assert bool((err <= x.double().abs() * 2.0**-22).all()), f"worst {float((err / x.double().abs()).nanmax()):.2e}"


def test_ties_round_away_from_zero_and_signs_are_kept():
    tie = 1.0 + 2.0**-11  # halfway between 1 and the next TF32 value, 1 + 2^-10
    head, rest = tf32_split(torch.tensor([tie, -tie]))
    assert head.tolist() == [1.0 + 2.0**-10, -(1.0 + 2.0**-10)]
    assert rest.tolist() == [-(2.0**-11), 2.0**-11]
    assert math.copysign(1.0, float(tf32_split(torch.tensor([-0.0]))[0])) == -1.0


def test_splits_are_kept_per_weight_and_version():
    """``Tf32Splits``: the same tensor twice gives the same split (not recomputed), an
    in-place update gives the new values' split, another tensor its own, and a freed weight
    leaves nothing behind."""
    import gc

    from runtime.kernels.mhc import Tf32Splits

    gen = torch.Generator().manual_seed(1)
    splits = Tf32Splits()
    fn = torch.randn(24, 64, generator=gen)
    first = splits.get(fn)
    assert splits.get(fn) is first
    assert torch.equal(first[0].double(), nearest_tf32(fn))
    fn.mul_(3.0)
    head, rest = splits.get(fn)
    assert head is not first[0]
    assert torch.equal(head.double(), nearest_tf32(fn))
    assert torch.equal(rest.double(), nearest_tf32(fn - head))
    other = fn.clone()
    assert splits.get(other) is not splits.get(fn)
    del fn, other, first, head, rest
    gc.collect()
    assert len(splits._by_weight) == 0


def test_a_split_asked_for_inside_a_graph_capture_is_not_kept(monkeypatch):
    """Inside a capture nothing runs, so a kept split would be unwritten memory to an eager
    call before the first replay: it is returned (recorded into the graph) and not kept;
    the next call outside the capture splits and keeps it."""
    from runtime.kernels import mhc

    gen = torch.Generator().manual_seed(2)
    splits = mhc.Tf32Splits()
    fn = torch.randn(24, 64, generator=gen)
    monkeypatch.setattr(mhc, "capturing", lambda: True)
    inside = splits.get(fn)
    assert torch.equal(inside[0].double(), nearest_tf32(fn))
    assert splits.get(fn) is not inside  # not kept: split again
    monkeypatch.setattr(mhc, "capturing", lambda: False)
    outside = splits.get(fn)
    assert splits.get(fn) is outside


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_split_made_in_a_real_capture_is_replayed_and_not_kept():
    """On the GPU: the split first asked for while a graph is captured is computed by the
    graph's replay, and the cache holds nothing from the capture."""
    from runtime.kernels.mhc import Tf32Splits

    splits = Tf32Splits()
    fn = torch.randn(24, 64, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        head, rest = splits.get(fn)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(head.double().cpu(), nearest_tf32(fn.cpu()))
    assert len(splits._by_weight) == 0
