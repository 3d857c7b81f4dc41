"""benchmarks/topk_bound.py: its keys order like the floats, its bound is the kernel's
(worked out by hand on one chunk), and a bad flag is one line with exit 2."""

from __future__ import annotations

import torch

from benchmarks.topk_bound import keys_of, listed, main


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


def test_bad_rows_is_one_line(capsys, tmp_path):
    assert main(["--rows", "0", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("benchmarks/topk_bound.py: --rows: expected >= 1") and err.count("\n") == 1
