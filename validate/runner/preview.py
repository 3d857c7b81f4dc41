"""What ``run --ablate`` will do, said before it starts: its variants, the fused variants
it leaves out (and why), and an estimated time.

An ablation multiplies the work by its number of variants; on a CPU that was 13
variants and about 10 hours, most of them ``fused_*`` variants that silently ran the
reference kernels. The user should see the list and the bill first.

The estimate counts the plan's tokens per phase (the quality pass's prompts under the
engine's own tokenizer, the ``[speed]`` sweep, the teacher-forced fidelity prompts of
each candidate) and multiplies them by a cost per token measured for that phase, for
the (preset, device) pairs it was measured on; elsewhere it says there is none rather
than guessing. It is rough: the costs come from one shared 2-core machine with one torch thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from validate.plan.fused import FusedAvailability, fused_availability
from validate.plan.schema import Plan


@dataclass(frozen=True)
class TokenCosts:
    """Seconds per token of each phase of one variant, measured on one (preset, device):
    ``prompt`` per prompt token of the quality pass (warm priming and generation
    included), ``sweep`` per token of the ``[speed]`` sweep (prompt + output),
    ``fidelity`` per teacher-forced token (prompt + ``fidelity_tokens``) of a candidate."""

    prompt: float
    sweep: float
    fidelity: float
    source: str


# benchmarks/results/ablate-estimate-cpu.md, one torch thread: the quality pass from the
# demo benchmark (52.8 CPU s for 4 variants x 33,983 prompt tokens), the sweep and
# fidelity phases from the stored timeline of tiny-ab.toml at 10 items per task.
COSTS = {("testbed", "cpu"): TokenCosts(prompt=52.8 / (4 * 33_983), sweep=0.0013,
                                        fidelity=11.7 / 12_062,
                                        source="benchmarks/results/ablate-estimate-cpu.md")}


@dataclass(frozen=True)
class AblationPreview:
    """``prompt_tokens`` per variant; ``seconds`` for all variants, None when no cost
    was measured for this (preset, device); ``basis`` says where the estimate comes from."""

    variants: tuple[str, ...]
    fused: FusedAvailability
    prompt_tokens: int
    seconds: float | None
    basis: str
    sweep_tokens: int = 0
    fidelity_tokens: int = 0

    def lines(self) -> list[str]:
        out = [f"--ablate: {len(self.variants)} variants: {', '.join(self.variants)}"]
        if self.fused.skipped:
            out.append(f"left out: {', '.join(self.fused.skipped)}, {self.fused.reason} "
                       f"(they would run the reference kernels under another name; "
                       f"all_on keeps the reference kernels)")
        per_variant = (f"per variant {self.prompt_tokens:,} prompt tokens, "
                       f"{self.sweep_tokens:,} sweep tokens, {self.fidelity_tokens:,} "
                       f"teacher-forced fidelity tokens")
        if self.seconds is None:
            out.append(f"estimated time: unknown ({per_variant}; {self.basis})")
        else:
            out.append(f"estimated time: about {_duration(self.seconds)} ({per_variant}; "
                       f"{self.basis}); a rerun resumes what is stored")
        return out

    def to_dict(self) -> dict:
        return {"variants": list(self.variants), "fused": self.fused.to_dict(),
                "prompt_tokens": self.prompt_tokens, "sweep_tokens": self.sweep_tokens,
                "fidelity_tokens": self.fidelity_tokens, "seconds": self.seconds,
                "basis": self.basis}


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _tokenizer(settings: dict):
    from validate.engines.builtin_source import ModelSource

    checkpoint = settings.get("checkpoint")
    return ModelSource(preset=None if checkpoint else settings.get("preset", "tiny"),
                       checkpoint=checkpoint, device="cpu").tokenizer()


def token_counts(plan: Plan) -> tuple[int, int, int]:
    """(prompt tokens of the quality pass, sweep tokens, fidelity tokens) of one variant:
    every planned request under the engine's tokenizer; the sweep's levels x requests x
    (prompt + output); the first ``fidelity_prompts`` prompts of each task plus
    ``fidelity_tokens`` each (candidates only)."""
    from validate.runner.requests import load_tasks, planned_requests

    tokenizer = _tokenizer(dict(plan.engine.settings))
    requests = planned_requests(plan, load_tasks(plan), plan.baseline)
    prompt = sum(len(tokenizer.encode(r.request.prompt)) for r in requests)
    sweep = 0
    if plan.speed is not None:
        s = plan.speed
        sweep = len(s.sweep_levels) * s.requests_per_level * (s.prompt_tokens + s.max_tokens)
    fidelity = 0
    for spec in plan.tasks:
        first = [r for r in requests if r.request.task == spec.name and r.repeat == 0]
        fidelity += sum(len(tokenizer.encode(r.request.prompt)) + plan.fidelity_tokens
                        for r in first[: plan.fidelity_prompts])
    return prompt, sweep, fidelity


def ablation_fused(plan: Plan) -> FusedAvailability:
    """The fused ops ``run --ablate`` of ``plan`` runs: those that run fused on the plan's
    device (Triton's interpreter counts when TRITON_INTERPRET=1 asks for it)."""
    settings = dict(plan.engine.settings)
    return fused_availability(str(settings.get("device", "cpu")), allow_interpreter=True,
                              dtype=settings.get("dtype"))


def ablation_preview(plan: Plan) -> AblationPreview:
    """The preview of an ablation plan (``validate.runner.execute.prepare`` with
    ``ablate``) for the builtin engine."""
    fused = ablation_fused(plan)
    settings = dict(plan.engine.settings)
    prompt, sweep, fidelity = token_counts(plan)
    device = str(settings.get("device", "cpu")).split(":")[0]
    key = (None if settings.get("checkpoint") else settings.get("preset", "tiny"), device)
    cost = COSTS.get(key)
    n = len(plan.variant_names)
    if cost is None:
        basis = (f"no cost per token measured for preset {key[0] or 'checkpoint'} on "
                 f"{device}; measured: " + ", ".join(f"{p} on {d}" for p, d in COSTS))
        return AblationPreview(plan.variant_names, fused, prompt, None, basis, sweep, fidelity)
    seconds = n * (prompt * cost.prompt + sweep * cost.sweep) + (n - 1) * fidelity * cost.fidelity
    basis = (f"{1e3 * cost.prompt:.2f} / {1e3 * cost.sweep:.1f} / {1e3 * cost.fidelity:.2f} "
             f"ms per token of the quality pass / sweep / fidelity with one torch thread, "
             f"from {cost.source}; a loaded machine takes longer, and torch's default "
             f"threads on a shared 2-core machine were measured 5x slower "
             f"(OMP_NUM_THREADS=1 avoids it)")
    return AblationPreview(plan.variant_names, fused, prompt, seconds, basis, sweep, fidelity)
