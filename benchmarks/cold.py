"""Cold readings for benchmarks/kernels.py: an op's device time with its inputs in HBM,
not in L2.

Why. The table's "fused graph" time replays 20 calls on the same tensors, so an op that
moves less than the L2 (50 MB on the H200) reads most of its inputs from L2 after the
first call: the indexer at 128k keys (34 MB) measured 118-124 % of the 4.3 TB/s roofline
(kernels_h200.md), which no read from HBM can. A decode step reads each layer's caches
and weights once, from HBM. The cold reading replays calls cycling through ``copies``
clones of the inputs, so that between two calls on one copy the others have moved at
least ``L2_FOOTPRINTS`` times the L2 through it: a copy's lines are gone by its next turn.
Outputs are allocated per call, as the ops do.
"""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import torch

L2_FOOTPRINTS = 3  # the other copies move this many L2s between two calls on one copy
L2_BYTES_DEFAULT = 50 * 2**20  # H100 / H200, where the device does not say


def l2_bytes() -> int:
    """The current CUDA device's L2 size (torch's device properties), else the H200's."""
    return int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or L2_BYTES_DEFAULT)


def cold_copies(bytes_moved: float, l2: int) -> int:
    """How many copies of the inputs a cold reading cycles through: 1 when one call already
    moves ``L2_FOOTPRINTS`` L2s (its own reads evict it), else enough that the other copies
    move that much between two calls on one."""
    if bytes_moved <= 0:
        raise ValueError(f"cold_copies: expected the bytes a call moves (> 0), got {bytes_moved}")
    need = L2_FOOTPRINTS * l2
    return 1 if bytes_moved >= need else 1 + math.ceil(need / bytes_moved)


def clone_tensors(obj):
    """``obj`` with every tensor in it cloned (through tuples, named tuples such as a packed
    cache, lists, dicts, namespaces and dataclasses); everything with no tensor inside (configs, numerics, ints) is shared as
    it is, not rebuilt."""
    if isinstance(obj, torch.Tensor):
        return obj.clone()
    if isinstance(obj, (tuple, list)):
        items = [clone_tensors(v) for v in obj]
        if all(a is b for a, b in zip(items, obj, strict=True)):
            return obj
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)  # a NamedTuple takes its fields
    if isinstance(obj, dict):
        items = {k: clone_tensors(v) for k, v in obj.items()}
        return obj if all(items[k] is v for k, v in obj.items()) else items
    if isinstance(obj, SimpleNamespace):
        items = {k: clone_tensors(v) for k, v in vars(obj).items()}
        return obj if all(items[k] is v for k, v in vars(obj).items()) else SimpleNamespace(**items)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init}
        items = {k: clone_tensors(v) for k, v in fields.items()}
        return obj if all(items[k] is v for k, v in fields.items()) else dataclasses.replace(obj, **items)
    return obj


def cycled_calls(call, arg_sets: list, reps: int) -> list:
    """``max(reps, len(arg_sets))`` calls, rounded up to whole cycles of the copies, each
    ``call(args)`` on the next copy in turn."""
    n = len(arg_sets) * math.ceil(max(reps, len(arg_sets)) / len(arg_sets))
    return [lambda a=arg_sets[i % len(arg_sets)]: call(a) for i in range(n)]


def cold_graph_ms(call, args, bytes_moved: float, graph_calls_ms, hot_ms: float | None,
                  reps: int = 20) -> tuple[float | None, int]:
    """(per-call device time with cold inputs, the copies it cycled through):
    ``call(args)`` on ``args`` and its clones, replayed from one CUDA graph by
    ``graph_calls_ms`` (benchmarks/kernels.py's). One copy: a call already moves
    ``L2_FOOTPRINTS`` L2s, so the hot replay (``hot_ms``) was a cold one and is not measured
    again. None where the graph could not be captured."""
    times, copies = cold_readings_ms([call], args, bytes_moved, lambda lists: [graph_calls_ms(calls) for calls in lists],
                                     [hot_ms], reps)
    return times[0], copies


def cold_readings_ms(calls: list, args, bytes_moved: float, lists_ms, hot_ms: list[float | None],
                     reps: int = 20) -> tuple[list[float | None], int]:
    """(per-call device time with cold inputs of each of ``calls``, the copies they cycled
    through): every ``call(args)`` on the same ``args`` and clones of them, each call's
    cycle one list for ``lists_ms`` (benchmarks/kernels.py's ``interleaved_lists_ms`` reads
    the variants of a sweep in turn, so a drift of the machine reaches them alike; the
    clones are made once and shared). One copy: each hot replay (``hot_ms``) was a cold one
    and is not measured again. A call whose hot replay could not be captured (None) is not
    read cold either."""
    copies = cold_copies(bytes_moved, l2_bytes())
    if copies == 1:
        return list(hot_ms), copies
    out: list[float | None] = [None] * len(calls)
    ready = [i for i, ms in enumerate(hot_ms) if ms is not None]
    if not ready:
        return out, copies
    arg_sets = [args] + [clone_tensors(args) for _ in range(copies - 1)]
    times = lists_ms([cycled_calls(calls[i], arg_sets, reps) for i in ready])
    for i, ms in zip(ready, times, strict=True):
        out[i] = ms
    return out, copies
