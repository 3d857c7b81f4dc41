"""benchmarks/topk_bound.py: its keys order like the floats, its bound is the kernel's
(worked out by hand on one chunk), and a bad flag is one line with exit 2."""

from __future__ import annotations

import torch

from benchmarks.topk_bound import keys_of, listed, main, row_bound_path
from runtime.kernels.topk_tiles import RowBound


def test_keys_order_like_the_floats_and_zeros_tie():
    values = torch.tensor([-3.5, -1e-30, -0.0, 0.0, 1e-40, 2.0, float("inf"), float("-inf")])
    keys = keys_of(values)
    assert torch.equal(torch.argsort(keys, stable=True), torch.argsort(values, stable=True))
    assert keys[2] == keys[3]  # -0.0 and +0.0


def test_the_bound_by_hand():
    """4 interleaved groups of [1, 2, 3, 7.26, 5, 6, 7.3, 8]: maxima 5, 6, 7.3, 8; the 2nd
    largest, 7.3 = 1.825 x 4, cut to 6 mantissa bits is 1.8125 x 4 = 7.25, so 7.26, 7.3
    and 8 are listed."""
    chunk = torch.tensor([1.0, 2.0, 3.0, 7.26, 5.0, 6.0, 7.3, 8.0])
    assert listed(chunk, 4, 2) == 3
    assert listed(chunk, 4, 3) == 4  # the 3rd largest maximum, 6: 6, 7.26, 7.3, 8
    assert listed(chunk, 4, 1) == 1  # the largest, 8
    assert listed(chunk, 4, 5) == 8  # more keys needed than groups: no bound, every key listed


def test_the_row_bound_by_hand():
    """The same keys as two chunks of 4 with one group per key (RowBound(maxima_per_k=1):
    32 maxima shared out over 2 chunks, at most 4 a chunk): the bound is the need-th
    largest key cut to 15 bits. k = 2: 7.3 cut to 7.25, three keys above it, a candidate
    tile of 32; k = 8 with one -inf: need 7, the 7th largest (1.0) cut to itself, 6 keys
    above it (fewer than need: its ties decide); all -inf: nothing finite."""
    row = torch.tensor([1.0, 2.0, 3.0, 7.26, 5.0, 6.0, 7.3, 8.0])
    sizes = RowBound(maxima_per_k=1)
    assert row_bound_path(row, 2, 4, sizes) == (3, "registers")
    row[1] = float("-inf")
    assert row_bound_path(row, 8, 4, sizes) == (6, "ties at the bound")
    assert row_bound_path(torch.full((8,), float("-inf")), 2, 4, sizes) == (0, "nothing finite")


def test_bad_rows_is_one_line(capsys, tmp_path):
    assert main(["--rows", "0", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("benchmarks/topk_bound.py: --rows: expected >= 1") and err.count("\n") == 1
