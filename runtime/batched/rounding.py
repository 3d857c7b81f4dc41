"""The model's own roundings (FP8 window KV, NVFP4 global entries, MXFP4 index keys and
queries) with an optional straight-through gradient.

The roundings are model semantics (docs/design.md, principle 4), so the batched forward keeps
them. A rounding has zero derivative almost everywhere, so for training the gradient is
passed through unchanged (the straight-through estimator, as in QAT):

    forward:  y = x + (q(x) - x)    which equals q(x) bit for bit: q(x) and x are within a
                                    factor of two of each other (or q(x) == 0), so
                                    q(x) - x is exact (Sterbenz) and so is the sum;
    backward: dy/dx = 1.

Without straight-through the rounding is applied to a detached input: the true
derivative of a rounding, zero.
"""

from __future__ import annotations

import torch

from runtime.quant import fake_quant_fp8_ue8m0, fake_quant_mxfp4, fake_quant_nvfp4

FORMATS = {
    "fp8": lambda x: fake_quant_fp8_ue8m0(x, block=32),  # window KV
    "nvfp4": lambda x: fake_quant_nvfp4(x, block=16),  # global KV entries
    "mxfp4": lambda x: fake_quant_mxfp4(x, block=32),  # indexer keys and queries
}


def round_to(x: torch.Tensor, fmt: str, straight_through: bool) -> torch.Tensor:
    """x [..., n] -> the ``fmt`` fake-quant of x; gradient identity if ``straight_through``."""
    quant = FORMATS[fmt]
    plain = x.detach()
    rounded = quant(plain)
    if not straight_through:
        return rounded
    return x + (rounded - plain)
