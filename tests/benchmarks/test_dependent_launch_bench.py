"""benchmarks/dependent_launch.py off the GPU: the bit-equality it checks before timing
(tensors, tuples of them, mix records; a one-ulp float difference or another id is a
difference) and its table of variants against the first (its refusals:
test_timing_flags.py)."""

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


def test_the_table_gives_each_variant_against_the_first():
    case = Case("gate", "mid", "T=1", {"default": None, "pdl": None, "2 launches + pdl": None}, ())
    case.us = {"default": [10.0, 9.0, 11.0], "pdl": [8.0, 9.5, 9.0], "2 launches + pdl": [12.0, 12.5, 11.5]}
    case.launches = {"default": 1, "pdl": 1, "2 launches + pdl": 2}
    case.same_bits = {"default": True, "pdl": True, "2 launches + pdl": False}
    rows = case.rows()
    assert [row["variant"] for row in rows] == ["default", "pdl", "2 launches + pdl"]
    assert [row["us"] for row in rows] == [10.0, 9.0, 12.0]
    assert [row["ratio"] for row in rows] == pytest.approx([1.0, 0.9, 1.2])
    doc = markdown(ENV, "cmd", rows, 3)
    assert "| gate | mid | T=1 | pdl | 1 | 9.00 | 0.900 | same |" in doc
    assert "| gate | mid | T=1 | 2 launches + pdl | 2 | 12.00 | 1.200 | DIFFERENT |" in doc
