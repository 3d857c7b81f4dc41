"""Planted quality degradations, graded by size, as variants of a calibration plan.

Every family is a real variant of the builtin engine, run on the same weights:

- ``logit_noise=s``: exact SWA plus Gaussian noise of std ``s`` on every logit row
  (``validate.perturb``); compared against exact.
- ``drop_window=d``: exact SWA on a view of the weights whose window is W - d
  (``validate.perturb``); compared against exact.
- ``replay_short=k``: bounded replay with ``RuntimeOptions(swa="bounded",
  replay_tokens=W - k)``, a bounded replay whose window bookkeeping is k positions short
  of what the window W needs. Read from ``runtime/model.py``, ``runtime/state.py`` and
  ``runtime/rows.py``, the runtime then does exactly this:

  * encoder side, after a prefix-cache hit of H > W - k tokens: it re-feeds only
    [H - W + k, H) (k tokens fewer than the correct replay) with window reads clamped
    at H - W + k, so every query below position H + k - 1 sees up to k fewer window
    positions than under correct bounded replay (k fewer for the replayed ones); hits
    of W - k < H <= W, which correct replay ignores (cold prefill), are replayed too;
  * decoder side, on every prefill chunk whose logits are "last": the layers after the
    cut run on the chunk's last W - k rows only, window reads clamped at
    chunk_end - W + k, so the row that predicts the next token reads k positions short
    of its window;
  * consequence of the two: layers after the cut never compute their window KV below
    chunk_end - W + k, yet the next chunk's first rows and the first k - 1 decode steps
    read positions down to chunk_end - W + 1. This runtime keeps never-computed window
    KV as NaN on purpose (``runtime/state.py``), so those reads turn the reading rows'
    attention output into NaN; for a decode step that is the step's logits, and greedy
    decoding then emits token id 0 (``<|bos|>``: dropped from the text, kept in the
    context). So k = 1 only shortens windows (no uncomputed read), while k >= 2 also
    emits k - 1 garbage tokens right after the first generated one. A real server would read stale
    or zero KV there instead of NaN; the direction carries over, the size need not.

  Each short level is compared twice: against correct bounded replay (what the bug
  costs relative to the optimization it breaks) and against exact (what a release
  gate that pins exact as the baseline sees).

Two reference rows come with every calibration: the A/A control (exact against its own
outcomes: planted size 0) and the real optimization (correct bounded replay vs exact).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from validate.errors import ValidateInputError

EXACT, BOUNDED = "exact", "bounded"
FAMILIES = ("control", "optimization", "logit_noise", "drop_window", "replay_short")


@dataclass(frozen=True)
class PlantedVariant:
    """One variant of the calibration plan: builtin runtime options and a perturbation."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)
    perturb: dict[str, Any] = field(default_factory=dict)

    def table(self) -> dict[str, Any]:
        """The plan's ``[variants.<name>]`` table."""
        return {**self.options, **({"perturb": dict(self.perturb)} if self.perturb else {})}


@dataclass(frozen=True)
class PlantedRow:
    """One compared pair: ``candidate`` (degraded) against ``reference``."""

    label: str  # e.g. "replay_short=2"
    family: str  # one of FAMILIES
    size: float  # the planted size (0 for the control and the optimization)
    candidate: str  # variant names of the plan
    reference: str

    @property
    def pair(self) -> str:
        return f"{self.candidate} vs {self.reference}"

    def to_dict(self) -> dict:
        return {"label": self.label, "family": self.family, "size": self.size,
                "candidate": self.candidate, "reference": self.reference, "pair": self.pair}


@dataclass(frozen=True)
class PlantedLevels:
    window: int
    variants: tuple[PlantedVariant, ...]
    rows: tuple[PlantedRow, ...]


def _noise_name(s: float) -> str:
    return f"noise-{s:g}"


def planted_quality_levels(window: int, *, noise: Sequence[float] = (),
                           drop_window: Sequence[int] = (), replay_short: Sequence[int] = (),
                           seed: int = 0) -> PlantedLevels:
    """The variants to run and the rows to compare, for a model whose window is ``window``.

    Order of rows: the A/A control, bounded vs exact, each noise level, each window
    drop, then per short replay ``k`` the pair against bounded and against exact.
    """
    for s in noise:
        if not s > 0:
            raise ValidateInputError(f"--noise: levels must be > 0, got {s:g}")
    for d in drop_window:
        if not 0 < d < window:
            raise ValidateInputError(f"--drop-window: levels must lie in [1, {window - 1}] "
                                     f"(the window is {window} tokens), got {d}")
    for k in replay_short:
        if not 0 < k < window:
            raise ValidateInputError(f"--replay-short: levels must lie in [1, {window - 1}] "
                                     f"(the window is {window} tokens), got {k}")
    for name, values in (("--noise", noise), ("--drop-window", drop_window),
                         ("--replay-short", replay_short)):
        if len(set(values)) != len(values):
            raise ValidateInputError(f"{name}: a level is given twice ({list(values)})")
    variants = [PlantedVariant(EXACT, {"swa": "exact"}),
                PlantedVariant(BOUNDED, {"swa": "bounded"})]
    rows = [PlantedRow("A/A control", "control", 0.0, EXACT, EXACT),
            PlantedRow("bounded replay", "optimization", 0.0, BOUNDED, EXACT)]
    for s in noise:
        name = _noise_name(s)
        variants.append(PlantedVariant(name, {"swa": "exact"},
                                       {"logit_noise": float(s), "seed": int(seed)}))
        rows.append(PlantedRow(f"logit_noise={s:g}", "logit_noise", float(s), name, EXACT))
    for d in drop_window:
        name = f"drop-{d}"
        variants.append(PlantedVariant(name, {"swa": "exact"}, {"drop_window": int(d)}))
        rows.append(PlantedRow(f"drop_window={d}", "drop_window", float(d), name, EXACT))
    for k in replay_short:
        name = f"short-{k}"
        variants.append(PlantedVariant(name, {"swa": "bounded", "replay_tokens": window - k}))
        rows.append(PlantedRow(f"replay_short={k}", "replay_short", float(k), name, BOUNDED))
        rows.append(PlantedRow(f"replay_short={k}", "replay_short", float(k), name, EXACT))
    return PlantedLevels(window, tuple(variants), tuple(rows))
