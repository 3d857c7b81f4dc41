"""Compile a Triton kernel for sm_90 (H100/H200) on a machine without a GPU: Triton's
front end and the ptxas its wheel ships. What a launch on the GPU would compile, read on a
CPU: tests/runtime/compile_sm90.py compiles the runtime's launches with it (registers,
spills, SASS), benchmarks/cluster_probe_sm90.py asks it whether a reduction across a
thread-block cluster compiles.

The Triton first on ``sys.path`` compiles. The GPU machine runs Triton 3.6: ``pip install
--no-deps --target DIR triton==3.6.0`` and run with ``PYTHONPATH=DIR`` to read what it will
run. Triton compiles nothing for a GPU in a process that has switched on its interpreter,
so callers under pytest run this in a process of their own.
"""

from __future__ import annotations

import inspect

import triton

# launch keywords that are compile options, not constexprs
OPTIONS = ("num_warps", "num_ctas", "enable_fp_fusion", "num_stages", "launch_pdl")


def compile_sm90(fn, signature: dict, kwargs: dict, multiples_of_16: tuple[str, ...] = ()):
    """``fn`` compiled for sm_90 as a launch with these runtime argument types and keyword
    arguments (constexprs and compile options) would compile it. ``multiples_of_16``: the
    integer arguments whose launch values are multiples of 16. ``fn`` may be jitted already
    (a kernel with helpers, bound to them by runtime/kernels/backend.py's ``jit``)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    # (a launch may pass runtime arguments by name too: those are in the signature)
    constexprs = {k: v for k, v in kwargs.items() if k not in OPTIONS and k not in signature}
    jitted = fn if isinstance(fn, triton.runtime.jit.JITFunction) else triton.jit(fn)
    # constexprs a launch leaves out take their defaults, as the launch's own compile does
    constexprs.update({p.name: p.default for p in jitted.params
                       if p.is_constexpr and p.name not in constexprs and p.default is not inspect.Parameter.empty})
    # Pointers aligned to 16 bytes and integers that are multiples of 16, as a launch
    # specializes them (without it the compiler cannot vectorise loads and picks other
    # layouts).
    aligned = {(jitted.arg_names.index(k),): [["tt.divisibility", 16]] for k, v in signature.items()
               if v.startswith("*") or k in multiples_of_16}
    src = ASTSource(fn=jitted, signature={**signature, **{k: "constexpr" for k in constexprs}},
                    constexprs=constexprs, attrs=aligned)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={k: v for k, v in kwargs.items() if k in OPTIONS})


def divisible_by_16(**ints: int) -> tuple[str, ...]:
    """The names among these integer launch arguments whose values are multiples of 16: a
    launch specializes them as such, and without it the compiler cannot vectorise their
    loads (the gate's 4,096-row launch compiled to scalar 2-byte loads)."""
    return tuple(name for name, value in ints.items() if value % 16 == 0)
