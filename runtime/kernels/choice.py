"""Parsing ``RuntimeOptions.kernels``: which ops should run fused.

Accepted forms (vLLM's CustomOp convention):
- ``"reference"`` (or ``"none"``): every op runs its plain-PyTorch reference;
- ``"fused"`` (or ``"all"``): every op runs its fused kernel;
- a list/tuple (or a comma-separated string) of ``"+op"`` / ``"-op"`` entries, optionally
  starting with ``"all"``/``"none"`` as the base (default base: ``"none"``), e.g.
  ``["+gate", "-mhc"]`` or ``("all", "-attention")``.

This module has no heavy imports so ``runtime.options`` can validate with it.
"""

from __future__ import annotations

from collections.abc import Iterable

from runtime.kernels.errors import KernelChoiceError
from runtime.kernels.ops import OP_NAMES

__all__ = ["BASE_WORDS", "OP_NAMES", "fused_by_op", "normalise_choice"]
BASE_WORDS = {"reference": False, "none": False, "fused": True, "all": True}


def normalise_choice(value: str | Iterable[str]) -> str | tuple[str, ...]:
    """A hashable, validated form of a kernel choice (a str or a tuple of entries)."""
    if isinstance(value, str):
        if value in BASE_WORDS:
            return value
        value = [part.strip() for part in value.split(",") if part.strip()]
    try:
        entries = tuple(value)
    except TypeError:
        raise KernelChoiceError(f"RuntimeOptions.kernels: expected a str or a list of '+op'/'-op', got {value!r}") from None
    fused_by_op(entries)  # validates
    return entries


def fused_by_op(choice: str | Iterable[str]) -> dict[str, bool]:
    """op name -> True when the choice asks for its fused kernel."""
    if isinstance(choice, str):
        if choice in BASE_WORDS:
            return dict.fromkeys(OP_NAMES, BASE_WORDS[choice])
        choice = [part.strip() for part in choice.split(",") if part.strip()]
    entries = list(choice)
    base = False
    if entries and isinstance(entries[0], str) and entries[0] in BASE_WORDS:
        base = BASE_WORDS[entries.pop(0)]
    wanted = dict.fromkeys(OP_NAMES, base)
    for entry in entries:
        if not isinstance(entry, str) or len(entry) < 2 or entry[0] not in "+-":
            raise KernelChoiceError(
                f"RuntimeOptions.kernels: entry {entry!r} must be '+op' or '-op' (ops: {', '.join(OP_NAMES)})"
            )
        name = entry[1:]
        if name not in wanted:
            raise KernelChoiceError(
                f"RuntimeOptions.kernels: unknown op {name!r} in {entry!r} (ops: {', '.join(OP_NAMES)})"
            )
        wanted[name] = entry[0] == "+"
    return wanted
