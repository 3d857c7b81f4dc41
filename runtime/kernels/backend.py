"""Can a Triton kernel run here, and how (compiled on CUDA, or the CPU interpreter)?

Triton picks interpreter vs compiler when a function is wrapped by ``triton.jit``, by
reading ``TRITON_INTERPRET`` at that moment. Fused ops therefore wrap their kernels when
the registry builds them (at model construction), never at import: a test that sets
the variable for itself and builds a registry gets interpreted kernels, and nothing
leaks into code that built its kernels earlier or later.
"""

from __future__ import annotations

import functools
import os
import types
from dataclasses import dataclass

import torch


def _triton_imported_for_interpreter() -> bool:
    """Triton decides interpreter vs compiler for its own standard-library functions
    (``tl.sigmoid``, ``tl.max``, ...) once, when ``triton.language`` is first imported.
    An interpreted kernel calling compiled library functions fails with "Cannot call
    @triton.jit'd outside of the scope of a kernel", so interpreter mode is only usable
    when that import happened with TRITON_INTERPRET=1."""
    import triton.language.standard as standard
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(standard.sigmoid, InterpretedFunction)


def interpret_requested() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Backend:
    """Where fused kernels would run: ``mode`` is "cuda", "interpret" or "none"."""

    mode: str
    reason: str = ""

    @property
    def usable(self) -> bool:
        return self.mode != "none"

    @classmethod
    def detect(cls, device: torch.device | str, dtype: torch.dtype | None = None) -> Backend:
        """``dtype``: the tensors' dtype where known. Triton's interpreter keeps bfloat16
        as its uint16 bit pattern and runs ``tl.dot`` and arithmetic on the bits (Triton's
        debugging guide: no bfloat16 operations), so a fused op interpreted on bf16
        tensors returns wrong values (measured on ``tiny``: gate and attention fused alone
        moved the median logit row by 1.1-1.4 x max |logit|, top-1 agreement 0-3 %), which
        a quality run would report as the kernel's loss. Refused instead."""
        device = torch.device(device)
        try:
            import triton  # noqa: F401
        except ImportError:
            return cls("none", "triton is not installed")
        if interpret_requested():
            if device.type != "cpu":
                return cls("none", "TRITON_INTERPRET=1 runs on CPU tensors only")
            if not _triton_imported_for_interpreter():
                return cls("none", "triton was imported before TRITON_INTERPRET=1 was set "
                                   "(set it before the first import of triton)")
            if dtype == torch.bfloat16:
                return cls("none", "Triton's interpreter computes bfloat16 on its bit patterns, "
                                   "so interpreted fused kernels need float32 (dtype = \"float32\")")
            return cls("interpret")
        if device.type == "cuda" and torch.cuda.is_available():
            return cls("cuda")
        return cls("none", f"no CUDA device for tensors on {device} and TRITON_INTERPRET is not set")


def jit(fn, helpers: tuple = ()):
    """``triton.jit(fn)`` now (interpreter or compiler per the current environment).

    ``helpers``: plain functions the kernel calls by name (a ``tl.reduce`` combine
    function, say). Triton wants them jitted too, and jitting them at import would fix
    interpreter vs compiler for good (the module docstring says why not), so they are
    jitted here, with the kernel, and the kernel and the helpers are bound to a copy of
    the kernel's module namespace in which those names are the jitted helpers (so a helper
    may call another); the module itself keeps its plain functions. A helper from another
    module (runtime/kernels/pdl.py's ``gdc_enter``) also reads that module's names where
    the kernel's module has none of its own."""
    import triton

    if not helpers:
        return triton.jit(fn)
    scope = dict(fn.__globals__)
    for helper in helpers:
        for name, value in helper.__globals__.items():
            scope.setdefault(name, value)
    for helper in helpers:
        scope[helper.__name__] = triton.jit(_bound(helper, scope))
    return triton.jit(_bound(fn, scope))


def _bound(fn, scope: dict):
    """``fn`` reading its globals from ``scope``."""
    bound = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    functools.update_wrapper(bound, fn, updated=())
    return bound


def next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def cdiv(a: int, b: int) -> int:
    """Ceiling of a / b for positive ints (blocks needed to cover ``a``)."""
    return -(-a // b)
