"""Which fused ops can really run fused on a device, and why not when they cannot: the
one answer ``run --ablate`` and ``v41val demo`` both use.

On a CPU without CUDA (and without Triton's interpreter) the kernel registry falls back
to the reference for every op, so a ``fused_<op>`` variant would be the baseline under
another name, hours of compute that measure nothing. Such variants are left out and
named, instead of pretending to measure them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FusedAvailability:
    """``ops``: fused ops to run as variants; ``skipped``: the ``fused_<op>`` variants
    left out; ``reason``: why (empty when none is left out)."""

    ops: tuple[str, ...]
    skipped: tuple[str, ...]
    reason: str = ""

    def to_dict(self) -> dict:
        return {"ops": list(self.ops), "skipped": list(self.skipped), "reason": self.reason}


def fused_availability(device: str, allow_interpreter: bool = False,
                       dtype: str | None = None) -> FusedAvailability:
    """The fused ops that really run fused on ``device``: compiled on CUDA, or, with
    ``allow_interpreter``, Triton's CPU interpreter when TRITON_INTERPRET=1 asks for it
    (fused math, but far too slow for the demo's budget; ``run --ablate`` allows it
    because the user asked for it). ``dtype``: the engine's dtype name (the interpreter
    cannot run bfloat16)."""
    import torch

    from runtime.config import DTYPES
    from runtime.kernels.backend import Backend
    from validate.plan.ablate import fused_op_names

    names = fused_op_names()
    backend = Backend.detect(device, getattr(torch, dtype) if dtype in DTYPES else None)
    if backend.mode == "cuda" or (allow_interpreter and backend.mode == "interpret"):
        return FusedAvailability(names, ())
    if backend.mode == "interpret":
        why = "the Triton interpreter is too slow for the demo's budget"
    else:
        why = backend.reason
    return FusedAvailability((), tuple(f"fused_{op}" for op in names),
                             f"not available on this device ({device}): {why}")
