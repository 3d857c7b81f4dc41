"""The two ceilings of the GPU a benchmark runs on, measured in the same run: the
device-to-device copy bandwidth (bytes read plus bytes written) and the bf16 matrix-product
rate on random data.

Why: issue 16's roofline is the H200's (4.3 TB/s copy, 790 TFLOP/s bf16, both measured on
one: ``H200_ISSUE``), and the kernel table holds every case to it. The device tool also
hands out H100s (about 3.0 TB/s copy by /work's device notes, 3.35 TB/s by the datasheet),
and a fraction of the H200's bandwidth says little about a kernel on an H100. Read against
the card's own measured ceilings it does. The table shows both; its verdicts stay the
issue's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Ceilings:
    """Bytes per second a device-to-device copy moves (read + written) and bf16 dense
    FLOP per second: a roofline's two slopes."""

    copy_bytes_per_s: float
    bf16_flops_per_s: float

    def __post_init__(self) -> None:
        if not (self.copy_bytes_per_s > 0 and self.bf16_flops_per_s > 0):
            raise ValueError(f"Ceilings: expected positive rates, got {self.copy_bytes_per_s} B/s and "
                             f"{self.bf16_flops_per_s} FLOP/s")

    def floor_s(self, nbytes: float, flops: float) -> float:
        """The least time moving ``nbytes`` and doing ``flops`` can take: the larger of the
        two terms."""
        return max(nbytes / self.copy_bytes_per_s, flops / self.bf16_flops_per_s)

    def fraction(self, nbytes: float, flops: float, seconds: float) -> float:
        """How close ``seconds`` is to the floor (1.0: at it)."""
        return self.floor_s(nbytes, flops) / seconds

    def memory_bound(self, nbytes: float, flops: float) -> bool:
        return nbytes / self.copy_bytes_per_s >= flops / self.bf16_flops_per_s


H200_ISSUE = Ceilings(copy_bytes_per_s=4.3e12, bf16_flops_per_s=790e12)  # issue 16's roofline (issue 4's H200)


def copy_bytes_per_s(median_ms, nbytes: int = 1 << 30) -> float:
    """A ``nbytes`` device-to-device copy's bytes read plus written per second, its time
    the median of ``median_ms(fn)`` (the benchmark's own event timer): 1 GiB is far past
    any L2, so it is HBM's rate."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src))
    return 2 * nbytes / (ms * 1e-3)


def bf16_flops_per_s(median_ms, n: int = 8192) -> float:
    """An n x n x n bf16 matrix product's FLOP per second on random data (timed as above)."""
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    ms = median_ms(lambda: a @ b)
    return 2 * n**3 / (ms * 1e-3)


def measure(median_ms) -> Ceilings:
    """This GPU's ceilings (CUDA only; about a second), timed with ``median_ms(fn)``."""
    ceilings = Ceilings(copy_bytes_per_s(median_ms), bf16_flops_per_s(median_ms))
    torch.cuda.empty_cache()
    return ceilings
