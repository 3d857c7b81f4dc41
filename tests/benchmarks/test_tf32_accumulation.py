"""benchmarks/tf32_accumulation.py: its summation orders differ only in order (equal where
they add the same products in the same sequence), and a bad flag is one line with exit 2.
Its operands come from runtime.kernels.mhc.tf32_split, tested against a float64 recompute
in tests/runtime/test_mhc_tf32_split.py."""

from __future__ import annotations

import torch

from benchmarks.tf32_accumulation import ORDERS, main, project
from runtime.kernels.mhc import tf32_split


def test_the_orders_agree_where_they_add_the_same_sequence():
    """Remainders zero: "two running sums" adds the heads exactly as "running sum" does;
    one tile spanning all columns: "per tile, then added" is the running sum plus zero."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4, 64, generator=gen).bfloat16().float()
    hi = tf32_split(torch.randn(64, 8, generator=gen))[0]
    zero = torch.zeros_like(hi)
    assert torch.equal(project(ORDERS[0], x, hi, zero, 16), project(ORDERS[2], x, hi, zero, 16))
    lo = tf32_split(torch.randn(64, 8, generator=gen) * 2.0**-11)[0]
    assert torch.equal(project(ORDERS[0], x, hi, lo, 64), project(ORDERS[1], x, hi, lo, 64))


def test_bad_seeds_is_one_line(capsys, tmp_path):
    assert main(["--seeds", "0", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("benchmarks/tf32_accumulation.py: --seeds: expected >= 1") and err.count("\n") == 1
