"""Make result dictionaries strict JSON: non-finite floats become null, numpy scalars
and tuples become plain Python values (``json.dumps`` would otherwise write NaN, which
jq and most JSON parsers reject)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import is_dataclass
from typing import Any

import numpy as np


def json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return [json_safe(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def plain(value: Any) -> Any:
    """Dataclasses / mappings / tuples -> JSON-able values (NaN/inf become None)."""
    if hasattr(value, "to_dict") and not isinstance(value, type):
        return value.to_dict()
    if is_dataclass(value) and not isinstance(value, type):
        return {k: plain(getattr(value, k)) for k in value.__dataclass_fields__}
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    return json_safe(value)


class ToDict:
    """``to_dict()`` of a frozen dataclass: every field, made JSON-able by ``plain``."""

    def to_dict(self) -> dict:
        return {k: plain(getattr(self, k)) for k in self.__dataclass_fields__}  # type: ignore[attr-defined]
