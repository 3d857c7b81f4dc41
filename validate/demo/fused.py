"""Which fused ops the demo can measure on this device, and why not when it cannot.

On a CPU without CUDA the kernel registry falls back to the reference for every op, so
a ``fused_<op>`` variant would be the baseline under another name. The demo shows such
variants as "not available on this device" instead of pretending to measure them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FusedAvailability:
    """``ops``: fused ops to run as variants; ``reason``: why none run (empty if some)."""

    ops: tuple[str, ...]
    skipped: tuple[str, ...]
    reason: str = ""

    def to_dict(self) -> dict:
        return {"ops": list(self.ops), "skipped": list(self.skipped), "reason": self.reason}


def fused_availability(device: str) -> FusedAvailability:
    """The fused ops that really run fused on ``device`` (compiled on CUDA, or Triton's
    interpreter when TRITON_INTERPRET=1 asks for it, which is far too slow for a demo)."""
    from runtime.kernels.backend import Backend
    from validate.plan.ablate import fused_op_names

    names = fused_op_names()
    backend = Backend.detect(device)
    if backend.mode != "cuda":
        why = backend.reason or "the Triton interpreter is too slow for the demo's budget"
        return FusedAvailability((), tuple(f"fused_{op}" for op in names),
                                 f"not available on this device ({device}): {why}")
    return FusedAvailability(names, ())
