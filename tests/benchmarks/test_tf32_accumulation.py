"""benchmarks/tf32_accumulation.py: its TF32 rounding is cvt.rna's (checked against a
float64 recompute), its summation orders differ only in order (equal where they add the
same products in the same sequence), and a bad flag is one line with exit 2."""

from __future__ import annotations

import torch

from benchmarks.tf32_accumulation import ORDERS, main, project, tf32_round


def test_tf32_round_is_nearest_with_ties_away_from_zero():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4096, generator=gen) * 10.0 ** torch.randint(-3, 4, (4096,), generator=gen)
    got = tf32_round(x)
    assert not bool((got.view(torch.int32) & 0x1FFF).any())  # 10 mantissa bits left
    # float64 recompute: the nearest multiple of the TF32 ulp, halves away from zero
    exp = torch.floor(torch.log2(x.double().abs()))
    ulp = 2.0 ** (exp - 10)
    want = torch.sign(x.double()) * torch.floor(x.double().abs() / ulp + 0.5) * ulp
    assert torch.equal(got.double(), want)
    tie = torch.tensor([1.0 + 2.0**-11, -(1.0 + 3 * 2.0**-11)])  # exactly half a TF32 ulp above 1 / 1 + ulp
    assert tf32_round(tie).tolist() == [1.0 + 2.0**-10, -(1.0 + 2 * 2.0**-10)]


def test_the_orders_agree_where_they_add_the_same_sequence():
    """Remainders zero: "two running sums" adds the heads exactly as "running sum" does;
    one tile spanning all columns: "per tile, then added" is the running sum plus zero."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(4, 64, generator=gen).bfloat16().float()
    hi = tf32_round(torch.randn(64, 8, generator=gen))
    zero = torch.zeros_like(hi)
    assert torch.equal(project(ORDERS[0], x, hi, zero, 16), project(ORDERS[2], x, hi, zero, 16))
    lo = tf32_round(torch.randn(64, 8, generator=gen) * 2.0**-11)
    assert torch.equal(project(ORDERS[0], x, hi, lo, 64), project(ORDERS[1], x, hi, lo, 64))


def test_bad_seeds_is_one_line(capsys, tmp_path):
    assert main(["--seeds", "0", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("benchmarks/tf32_accumulation.py: --seeds: expected >= 1") and err.count("\n") == 1
