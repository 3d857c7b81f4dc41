"""The boundary probe tasks: one registered task per boundary class.

One task per class, so the gate's Holm correction over (optimization x task) claims
is a paired McNemar per class with Holm across classes, with no new statistics.
Every class is a ``TestbedSpec`` over ``tasks.testbed.probe.generate`` with the
lookup exemplars, 100 items, prompts of 287-449 tokens (the queried record at least
3 windows back unless the class places it elsewhere). Lengths are picked so that only
the named boundary varies between sibling classes: the ``suffix`` and ``hit`` classes
sit at n mod 64 in {31, 32, 33} and {0, 1}; the others at n mod 64 in [40, 63], away
from both.

Why "length beyond the hit", not total length: in warm mode every prompt hits the
cache at H (``boundaries.warm_hit``), and both halves of bounded replay are defined
from H: the encoder re-feeds [H - W, H), the decoder trim keeps the last W rows of the
chunk that is fed, [H, n) under an exact encoder. Total length says nothing on its
own (the shared few-shot prefix is 180 tokens, and never a cached prefix by itself);
with a cold engine (H = 0) the two coincide.
"""

from __future__ import annotations

from tasks.testbed.boundaries import PREFIX_BLOCK, WINDOW
from tasks.testbed.exemplars import LOOKUP_EXEMPLARS
from tasks.testbed.probe import generate
from tasks.testbed.probe_params import ProbeParams
from tasks.testbed.spec import TestbedSpec

LOW, HIGH = 287, 449  # prompt lengths (tokens); the mean prompt is ~370 tokens
PROBE_SIZE = 100


def _lengths(residues: range | tuple[int, ...], parity: int | None = None) -> tuple[int, ...]:
    return tuple(n for n in range(LOW, HIGH + 1) if n % PREFIX_BLOCK in residues
                 and (parity is None or n % 2 == parity))


def _spec(name: str, params: ProbeParams) -> TestbedSpec:
    return TestbedSpec(name=f"testbed_probe_{name}", params=params, generator=generate,
                       exemplars=LOOKUP_EXEMPLARS, test_size=PROBE_SIZE)


QUIET = range(40, 64)  # n mod 64 away from the suffix (31-33) and hit (0, 1) boundaries
PROBE_CLASSES = (
    # n - H = W - 1, W, W + 1: the decoder trim drops 0, 0, 1 rows (exact encoder)
    _spec("suffix_wm1", ProbeParams(_lengths((WINDOW - 1,)))),
    _spec("suffix_w", ProbeParams(_lengths((WINDOW,)))),
    _spec("suffix_wp1", ProbeParams(_lengths((WINDOW + 1,)))),
    # the ratio-2 compressor: the prompt ends on a completed pair, or one token into one
    _spec("ratio_even", ProbeParams(_lengths(QUIET, parity=0))),
    _spec("ratio_odd", ProbeParams(_lengths(QUIET, parity=1))),
    # the queried value on the replay start H - W, one before it, one after it
    _spec("replay_m1", ProbeParams(_lengths(range(52, 64)), anchor="replay_start", offset=-1)),
    _spec("replay_0", ProbeParams(_lengths(range(52, 64)), anchor="replay_start", offset=0)),
    _spec("replay_p1", ProbeParams(_lengths(range(52, 64)), anchor="replay_start", offset=1)),
    # the queried record's line cut by the first prefill chunk boundary (token 256)
    _spec("chunk", ProbeParams(tuple(n for n in _lengths(QUIET) if n >= 353), anchor="chunk")),
    # the prompt ends on a block boundary (its own last block is out of reach, the hit
    # falls back to the chunk end at 256) or one token after it (H = n - 1)
    _spec("hit_aligned", ProbeParams(_lengths((0,)))),
    _spec("hit_unaligned", ProbeParams(_lengths((1,)))),
)
PROBE_SPECS = {spec.name: spec for spec in PROBE_CLASSES}
PROBE_TASKS = tuple(PROBE_SPECS)
