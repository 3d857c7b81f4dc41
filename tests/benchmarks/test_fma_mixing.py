"""benchmarks/fma_mixing.py: its emulated fma rounds once where separate float32 ops round
twice (a hand-derived case), its nearest bf16 is the nearest on a brute-force grid, the
two mixing forms agree where every product is exact, and a bad flag is one line."""

from __future__ import annotations

import torch

from benchmarks.fma_mixing import fma32, main, mix, nearest_bf16


def test_the_emulated_fma_rounds_once():
    """a = b = 1 + 2^-12, c = -(1 + 2^-11): a * b + c = 2^-24 exactly. In float32 a * b
    rounds to 1 + 2^-11 (the 2^-24 is half an ulp, a tie to even), so separate ops give 0;
    one rounding keeps 2^-24."""
    a = torch.tensor([1 + 2.0**-12], dtype=torch.float32)
    c = torch.tensor([-(1 + 2.0**-11)], dtype=torch.float32)
    assert (a * a + c).item() == 0.0
    assert fma32(a, a, c).item() == 2.0**-24


def test_nearest_bf16_is_the_nearest_on_the_grid():
    gen = torch.Generator().manual_seed(0)
    grid = torch.tensor([1 + k / 128 for k in range(129)], dtype=torch.float64)  # every bf16 in [1, 2]
    values = 1 + torch.rand(2000, generator=gen, dtype=torch.float64)
    brute = grid[(grid[None, :] - values[:, None]).abs().argmin(1)]
    assert torch.equal(nearest_bf16(values), brute)


def test_the_forms_agree_where_every_product_is_exact():
    """comb a permutation and post a power of two: each X'_j is one stream plus a scaled
    out, every product exact, so the two forms give the same bits."""
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(3, 4, 16, generator=gen).bfloat16().float()
    out = torch.randn(3, 16, generator=gen).bfloat16().float()
    comb = torch.eye(4)[[2, 0, 3, 1]].expand(3, 4, 4).contiguous()
    post = torch.full((3, 4), 0.5)
    assert torch.equal(mix("fma", x, out, post, comb), mix("separate", x, out, post, comb))


def test_bad_seeds_is_one_line(capsys, tmp_path):
    assert main(["--seeds", "0", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("benchmarks/fma_mixing.py: --seeds: expected >= 1") and err.count("\n") == 1
