"""The "bf16x3" projection's host split of fn (runtime.kernels.mhc.bf16_split3), against a
float64 recompute: three bf16 parts, the first the bf16 nearest x (ties to even), each next
the bf16 nearest what the parts before it leave, summing to within 2^-24 |x| of x; and the
per-weight cache (``Bf16Splits``) keeping them. Pure torch on the CPU."""

from __future__ import annotations

import torch

from runtime.kernels.mhc import Bf16Splits, bf16_split3


def nearest_bf16(x: torch.Tensor) -> torch.Tensor:
    """float64 recompute: x rounded to 8 significant bits, ties to even (normal range)."""
    x64 = x.double()
    mant, exp = torch.frexp(x64)  # x = mant * 2^exp, 0.5 <= |mant| < 1
    scaled = mant * 2.0**8
    floor = torch.floor(scaled)
    frac = scaled - floor
    odd = torch.remainder(floor, 2) == 1
    up = (frac > 0.5) | ((frac == 0.5) & odd)
    return torch.ldexp(floor + up.double(), exp - 8)


def test_parts_are_the_nearest_bf16_of_what_is_left_and_sum_to_x():
    gen = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(20000, generator=gen) * 10.0 ** torch.randint(-6, 6, (20000,), generator=gen),
                   torch.tensor([0.0, 1.0, -1.0, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, -(1.0 + 2.0**-8),
                                 1.0 + 2.0**-8 + 2.0**-20])])
    parts = bf16_split3(x)
    assert parts.dtype == torch.bfloat16 and parts.shape == (3, *x.shape)
    left = x.double()
    for part in parts:
        assert torch.equal(part.double(), nearest_bf16(left)), "a part is not the nearest bf16 of what is left"
        left = left - part.double()
    err = (parts.double().sum(0) - x.double()).abs()
    assert bool((err <= x.double().abs() * 2.0**-24).all()), f"worst {float((err / x.double().abs()).nanmax()):.2e}"


def test_ties_go_to_even():
    # 1 + 2^-8 is halfway between 1 and 1 + 2^-7 (even: 1); 1 + 3 * 2^-8 between 1 + 2^-7
    # and 1 + 2^-6 (even: 1 + 2^-6)
    parts = bf16_split3(torch.tensor([1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8]))
    assert parts[0].float().tolist() == [1.0, 1.0 + 2.0**-6]
    assert parts[1].float().tolist() == [2.0**-8, -(2.0**-8)]
    assert parts[2].float().tolist() == [0.0, 0.0]


def test_parts_are_kept_per_weight_and_version():
    """The same tensor twice gives the same parts (not recomputed); an in-place update gives
    the new values' parts."""
    gen = torch.Generator().manual_seed(1)
    splits = Bf16Splits()
    fn = torch.randn(24, 64, generator=gen)
    first = splits.get(fn)
    assert splits.get(fn) is first
    fn.mul_(-0.75)
    again = splits.get(fn)
    assert again is not first
    assert torch.equal(again, bf16_split3(fn))
