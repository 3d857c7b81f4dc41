"""benchmarks/dependent_launch.py off the GPU: the bit-equality it checks before timing
(tensors, tuples of them, mix records; a one-ulp float difference or another id is a
difference) and its table's ratio (its refusals: test_timing_flags.py)."""

from __future__ import annotations

import pytest
import torch

from benchmarks.dependent_launch import Case, markdown, results_equal
from runtime.mhc import HcMix

ENV = {"gpu": "NVIDIA H200", "nvidia_smi": "x", "torch": "t", "triton": "t", "cuda": "c"}


def test_results_are_equal_only_bit_for_bit():
    x = torch.tensor([1.0, -0.0, 2.5])
    assert results_equal(x, x.clone())
    assert not results_equal(x, torch.tensor([1.0, 0.0, 2.5]))  # -0 is not +0 here
    assert not results_equal(x, torch.nextafter(x, torch.full_like(x, 9.0)))
    ids = torch.tensor([3, 1, 2])
    assert results_equal((x, ids), (x.clone(), ids.clone()))
    assert not results_equal((x, ids), (x.clone(), torch.tensor([3, 2, 1])))
    mix = HcMix(torch.rand(2, 4), torch.rand(2, 4), torch.rand(2, 4, 4))
    other = HcMix(mix.pre.clone(), mix.post.clone(), mix.comb.clone())
    assert results_equal((x, mix, x), (x, other, x))
    other.comb[1, 2, 3] += 1.0
    assert not results_equal((x, mix, x), (x, other, x))


def test_the_table_gives_the_medians_and_their_ratio():
    case = Case("attention", "mid", "T=1", (None, None), (), launches=2)
    case.us = {"off": [10.0, 9.0, 11.0], "on": [8.0, 9.5, 9.0]}
    row = case.row()
    assert row["off_us"] == 10.0 and row["on_us"] == 9.0 and row["ratio"] == pytest.approx(0.9)
    assert "| attention | mid | T=1 | 2 | 10.00 | 9.00 | 0.900 |" in markdown(ENV, "cmd", [row], 3)
