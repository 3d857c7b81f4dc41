"""Calibration: plant known degradations and show which ones this run size detects.

For each planted ``Perturbation`` (logit noise of a set standard deviation, a window
shrunk by a set number of tokens) the builtin engine runs the same prompts as the
unperturbed variant, and the exact teacher-forced fidelity is measured. A level is
*detected* when the KL mean is significantly above zero: a one-sided z test of the
mean with the prompt-clustered SE, at ``alpha``. The unperturbed variant against itself
(the A/A control, level "none") must come out exactly 0 and undetected -- if it does
not, the measurement itself is broken, which calibration also proves.

This checks the fidelity channel. On a random tiny model task accuracy sits at the
floor, so a quality gate cannot see anything there; the fidelity metrics can, and this
shows how large a degradation they see at the run's n.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from scipy import stats

from validate.engines.builtin import BuiltinEngine, BuiltinEngineConfig
from validate.engines.builtin_source import WeightsPool
from validate.fidelity.collect import exact_fidelity
from validate.fidelity.errors import FidelityError
from validate.fidelity.summary import EXACT, summarize
from validate.fidelity.types import FidelitySummary
from validate.perturb import Perturbation
from validate.progress import QUIET, Progress


@dataclass(frozen=True)
class CalibrationLevel:
    label: str
    perturbation: Perturbation
    fidelity: FidelitySummary
    z: float | None
    p_value: float | None
    detected: bool

    def to_dict(self) -> dict:
        return {"label": self.label, "perturbation": self.perturbation.to_dict(),
                "fidelity": self.fidelity.to_dict(), "z": self.z, "p_value": self.p_value,
                "detected": self.detected}


@dataclass(frozen=True)
class Calibration:
    alpha: float
    n_prompts: int
    levels: tuple[CalibrationLevel, ...]

    @property
    def control_clean(self) -> bool:
        """The A/A control shows no divergence at all (KL 0, top-1 agreement 1)."""
        control = self.levels[0]
        return (not control.detected and (control.fidelity.kl_mean or 0.0) <= 1e-9
                and control.fidelity.top1_agreement in (None, 1.0))

    def to_dict(self) -> dict:
        return {"alpha": self.alpha, "n_prompts": self.n_prompts,
                "control_clean": self.control_clean,
                "levels": [level.to_dict() for level in self.levels]}


def planted_levels(noise: Sequence[float], drop_window: Sequence[int],
                   seed: int = 0) -> list[tuple[str, Perturbation]]:
    """The A/A control first, then each noise level, then each window drop."""
    levels = [("none", Perturbation())]
    levels += [(f"logit_noise={s:g}", Perturbation(logit_noise=s, seed=seed)) for s in noise]
    levels += [(f"drop_window={d}", Perturbation(drop_window=d)) for d in drop_window]
    return levels


def detect(summary: FidelitySummary, alpha: float) -> tuple[float | None, float | None, bool]:
    """One-sided z test of mean KL > 0 with the clustered SE."""
    if not summary.kl_mean or not summary.kl_se:
        return None, None, False
    z = summary.kl_mean / summary.kl_se
    p = float(stats.norm.sf(z))
    return float(z), p, p < alpha


def calibrate(config: BuiltinEngineConfig, requests, levels: Sequence[tuple[str, Perturbation]],
              *, alpha: float = 0.05, max_new_tokens: int | None = 16,
              pool: WeightsPool | None = None, progress: Progress = QUIET) -> Calibration:
    """Measure every planted level against ``config`` (unperturbed) on ``requests``;
    one bar over the levels, moved after each batch of prompts."""
    if not 0 < alpha < 1:
        raise FidelityError(f"calibrate: alpha must be in (0, 1), got {alpha}")
    if not requests:
        raise FidelityError("calibrate: no requests")
    out = []
    with progress.bar("calibrate: planted levels", len(levels)) as bar:
        pool = pool if pool is not None else WeightsPool()
        base = BuiltinEngine(replace(config, perturb=Perturbation(), variant="baseline"), pool)
        for done, (label, perturbation) in enumerate(levels):
            variant = BuiltinEngine(replace(config, perturb=perturbation, variant=label), pool)
            found = exact_fidelity(base, variant, requests, max_new_tokens=max_new_tokens,
                                   progress=lambda f, d=done: bar.update(d + f))
            summary = summarize(found, EXACT)
            z, p, hit = detect(summary, alpha)
            out.append(CalibrationLevel(label, perturbation, summary, z, p, hit))
            bar.update(done + 1)
    return Calibration(alpha, len(requests), tuple(out))
