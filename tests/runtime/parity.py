"""What the per-op parity tests (tests/runtime/test_kernels_parity_*.py) share: the device
and configs they run at, random inputs that are never all zeros, and the two comparisons,
a max-error bound and a top-k id check that lets ids swap only among boundary ties. Each
failure message carries the input seed (the ``gen`` fixture of tests/runtime/conftest.py
prints it), so a failing draw can be replayed."""

from __future__ import annotations

import torch

from runtime.config import V41Config
from runtime.numerics import Numerics

CUDA = torch.cuda.is_available()
NUM = Numerics()
DEVICE = "cuda" if CUDA else "cpu"
TINY = V41Config.preset("tiny")
MID = V41Config.preset("mid")
FLASH = V41Config.preset("flash")


def randn(g, *shape, dtype=torch.float32, scale=1.0):
    x = torch.randn(*shape, generator=g) * scale
    assert x.abs().min() >= 0 and x.abs().max() > 0  # never all zeros
    return x.to(DEVICE, dtype)


def close(a, b, tol, rel=False, what="", seed=None):
    a, b = a.float().cpu(), b.float().cpu()
    assert a.shape == b.shape, f"{what}: shapes {a.shape} vs {b.shape}"
    if a.numel() == 0:
        return
    bound = tol * max(1.0, float(b.abs().max())) if rel else tol
    err = float((a - b).abs().max())
    assert err <= bound, f"{what}: max error {err:.3g} > {bound:.3g} (seed {seed})"


def ids_agree_tie_robust(ids_a, ids_b, values, k_tol, what, seed):
    """Per row: the chosen id sets are equal, except that ids may swap among entries whose
    value is within ``k_tol`` of the row's k-th chosen value (ties at the boundary)."""
    ids_a, ids_b, values = ids_a.cpu(), ids_b.cpu(), values.float().cpu()
    for r in range(ids_a.shape[0]):
        sa = {int(i) for i in ids_a[r] if i >= 0}
        sb = {int(i) for i in ids_b[r] if i >= 0}
        assert len(sa) == len(sb), f"{what}: row {r} picks {len(sa)} vs {len(sb)} (seed {seed})"
        if sa == sb:
            continue
        kth = min(float(values[r, i]) for i in sb)
        for i in sa ^ sb:
            assert abs(float(values[r, i]) - kth) <= k_tol, (
                f"{what}: row {r} id {i} differs and is not a boundary tie "
                f"({float(values[r, i])} vs k-th {kth}) (seed {seed})"
            )
