"""Programmatic dependent launch (Hopper's PDL): the second launch of a two-launch op is
placed on the GPU while the first is still running, and waits in the kernel instead of
in the launch queue.

Why. Four fused ops finish a decode call in a second launch: attention's merge of its
key-list splits, mHC's finishing launch, the gate's selecting launch and the split top-k's
selection among the candidates. Replayed from a CUDA graph, an empty Triton kernel costs
0.88-1.0 us per launch on the H200 (benchmarks/results/kernels_h200.md), and issue 16
holds these decode calls to twice that: a second launch alone takes half the budget.
With PDL (``launch_pdl=True``, the launch attribute
``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION``) the dependent grid is launched
once every program of the first has called ``griddepcontrol.launch_dependents`` (or
exited), and its programs block in ``griddepcontrol.wait`` until the first grid has
completed and its writes are visible: the launch latency overlaps the first kernel's run.

The rules every kernel here keeps (the PTX ISA's griddepcontrol section; Triton exposes it
as ``triton.language.extra.cuda``):

- a dependent (``launch_pdl=True``) waits before its first load and its first store: it
  reads what the first launch wrote, and may overwrite what the first launch still reads;
- it waits in every program and unconditionally, so it never completes before the grid
  it depends on (a later dependent of it relies on that);
- the first launch lets the dependent launch at its start: the dependent's programs then
  hold their SM slots while waiting, which at decode sizes (at most one wave of programs)
  takes nothing the first launch needs. Where the first launch runs in several waves those
  waiting programs take the slots of its later ones (mHC's sweep from 256 rows:
  benchmarks/results/tile_sweep_h200_mhc_pdl_rows_1.md), so a first launch can instead
  trigger at its exit (``at_exit``: it never calls ``launch_dependents``, and a program
  that exits counts as triggered): the dependent is launched when the last program of
  the first ends, and its launch overlaps only the first grid's completion.

CUDA only: ``griddepcontrol`` is inline PTX, which the interpreter cannot run, so the
switch is off there whatever a policy asks (:func:`dependent_launch`). Each op's policy
carries its own switch, on where the H200 timed it faster (``benchmarks/dependent_launch.py``,
benchmarks/results/dependent_launch_h200.md: the gate, and mHC up to 64 rows).
"""

from __future__ import annotations

import torch
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

__all__ = ["dependent_launch", "gdc_enter"]


def gdc_enter(DEPENDENT: tl.constexpr, AT_EXIT: tl.constexpr = False):
    """A kernel's first step when its op launches dependently, by its role: the dependent
    launch (``DEPENDENT``) waits for the grid before it; the first launch lets the dependent
    one launch, now or (``AT_EXIT``) by exiting. Called as ``if PDL: gdc_enter(ROLE,
    AT_EXIT)`` at a kernel's start, and jitted with the kernel (each kernel lists it among
    its helpers: runtime/kernels/backend.py's ``jit``).

    Why a jitted helper and not a ``core.extern`` builtin: when a torch.compile'd region
    calls a kernel, Inductor re-emits the kernel's source in a module of its own, copying
    the jitted functions it calls and importing only what it names from ``triton``; a
    builtin of this module was neither, and the gate's kernel failed to compile there
    (``NameError: gdc_enter``; the H100, session 47: the static step with
    ``decode_compile``). Jitted, it is copied, and the two names it calls come from
    ``triton``."""
    if DEPENDENT:
        gdc_wait()
    elif not AT_EXIT:
        gdc_launch_dependents()


def dependent_launch(asked: bool, device: torch.device) -> bool:
    """Whether a call on ``device`` launches its second kernel dependent on its first: when
    the policy asks for it and the device is a CUDA GPU of compute capability 9.0 or later
    (PDL's hardware); never on the interpreter."""
    return (asked and device.type == "cuda" and torch.cuda.is_available()
            and torch.cuda.get_device_capability(device)[0] >= 9)
