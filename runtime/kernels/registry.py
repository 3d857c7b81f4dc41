"""The per-op kernel registry: reference (plain PyTorch) or fused (Triton), chosen per op
ONCE, when the model is built, and held by the model (no module-level switches).

    ops = KernelRegistry(options.kernels, device=model_device)
    weights, ids = ops.gate(x, gate_w, bias, config, num)   # same signature either way
    ops.selected  -> {"gate": "fused", "mhc": "reference", ...}

An op whose fused kernel cannot run here (no Triton; tensors not on CUDA and
``TRITON_INTERPRET`` not set) falls back to its reference and the registry says so once
(one ``warnings.warn`` + one log line naming the ops and the reason). Tests force a path
with ``on_unavailable="error"`` (raise instead of falling back) or the choice "reference".
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterable

import torch

from runtime.kernels.backend import Backend
from runtime.kernels.choice import fused_by_op
from runtime.kernels.errors import KernelUnavailableError
from runtime.kernels.ops import BY_NAME, OP_NAMES
from runtime.kernels.reference import REFERENCE_OPS

log = logging.getLogger(__name__)

# Ops that only the fast numerics run fused: batch-invariant numerics keep their own row
# tiles (Numerics.linear) and the static step its every-expert MoE, whatever was chosen.
FAST_NUMERICS_ONLY = ("linear", "experts")
INVARIANT_REFERENCE = "reference (batch-invariant numerics)"
ENGINE_MOE_REFERENCE = "reference (the engine's MoE loops over experts; the fused op runs in static decode)"


def build_fused(name: str) -> Callable:
    """A fresh fused callable of op ``name`` (imported only when that op runs fused, so
    a reference-only model never imports Triton)."""
    return BY_NAME[name].build_fused()


class KernelRegistry:
    """Resolved implementations, one per op; attribute access (``ops.gate``) calls them."""

    def __init__(
        self,
        choice: str | Iterable[str] = "reference",
        *,
        device: torch.device | str = "cpu",
        dtype: torch.dtype | None = None,
        on_unavailable: str = "fallback",
    ) -> None:
        if on_unavailable not in ("fallback", "error"):
            raise ValueError(f"on_unavailable: expected 'fallback' or 'error', got {on_unavailable!r}")
        wanted = fused_by_op(choice)
        self.backend = Backend.detect(device, dtype)
        self._impls: dict[str, Callable] = {}
        self.selected: dict[str, str] = {}
        fell_back = []
        for name in OP_NAMES:
            if wanted[name] and self.backend.usable:
                self._impls[name] = build_fused(name)
                self.selected[name] = "fused"
            else:
                if wanted[name]:
                    fell_back.append(name)
                self._impls[name] = REFERENCE_OPS[name]
                self.selected[name] = "reference"
        if fell_back:
            message = (f"kernels: fused {', '.join(fell_back)} cannot run here "
                       f"({self.backend.reason}); using the reference")
            if on_unavailable == "error":
                raise KernelUnavailableError(message)
            warnings.warn(message, RuntimeWarning, stacklevel=2)
            log.warning(message)

    def __getattr__(self, name: str) -> Callable:
        impls = self.__dict__.get("_impls")
        if impls is not None and name in impls:
            return impls[name]
        raise AttributeError(f"KernelRegistry has no op {name!r} (ops: {', '.join(OP_NAMES)})")

    def is_fused(self, name: str) -> bool:
        return self.selected[name] == "fused"

    def fused_or_none(self, name: str) -> Callable | None:
        """The op's fused callable, or None when it runs its reference (for callers whose
        reference is their own code: ``Numerics``'s ``gemm``)."""
        return self._impls[name] if self.is_fused(name) else None

    def describe(self) -> dict[str, str]:
        """op -> "fused (cuda)" / "fused (interpret)" / "reference", for logs and reports."""
        return {n: f"fused ({self.backend.mode})" if s == "fused" else s for n, s in self.selected.items()}

    def describe_path(self, batch_invariant: bool, experts_on_path: bool) -> dict[str, str]:
        """``describe()`` for one model path (the engagement ledger's ``kernels``), with the
        fused ops that path does not call marked as the reference that runs instead:
        ``FAST_NUMERICS_ONLY`` under batch-invariant numerics, and ``experts`` where the
        MoE is the engine's per-expert loop (``experts_on_path`` False)."""
        out = self.describe()
        for op in FAST_NUMERICS_ONLY if batch_invariant else ():
            if self.is_fused(op):
                out[op] = INVARIANT_REFERENCE
        if not batch_invariant and not experts_on_path and self.is_fused("experts"):
            out["experts"] = ENGINE_MOE_REFERENCE
        return out
