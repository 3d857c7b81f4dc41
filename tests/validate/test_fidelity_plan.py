"""Fidelity of a builtin plan's variants against its baseline, per task: the glue the
analysis takes as ``fidelity=``. The numbers equal a direct ``exact_fidelity`` run."""

from __future__ import annotations

import pytest

from tasks.request import GenerationParams, Request
from validate.engines.builtin import BuiltinEngine, BuiltinEngineConfig
from validate.engines.builtin_source import ModelSource, WeightsPool
from validate.fidelity.collect import exact_fidelity
from validate.fidelity.errors import FidelityError
from validate.fidelity.for_plan import builtin_plan_fidelity
from validate.fidelity.summary import EXACT, summarize
from validate.perturb import Perturbation
from validate.plan.schema import VariantSpec

VARIANTS = {"exact": VariantSpec("exact", {"swa": "exact"}),
            "noisy": VariantSpec("noisy", {"swa": "exact"}, perturb={"logit_noise": 0.5}),
            "bounded": VariantSpec("bounded", {"swa": "bounded"})}


def _requests(task, prompts):
    return [Request(task, f"{task}-{k}", "generate", prompt=p,
                    gen=GenerationParams(max_gen_toks=3)) for k, p in enumerate(prompts)]


@pytest.mark.slow
def test_plan_fidelity_per_variant_and_task_equals_direct_runs():
    pool = WeightsPool()
    by_task = {"t1": _requests("t1", ["A prompt that is longer than the window, surely.", "B"]),
               "t2": _requests("t2", ["Another one"])}
    got = builtin_plan_fidelity({"preset": "micro", "seed": 7}, VARIANTS, "exact", by_task,
                                pool=pool)
    assert set(got) == {("noisy", "t1"), ("noisy", "t2"), ("bounded", "t1"), ("bounded", "t2")}
    assert all(s.method == EXACT for s in got.values())
    assert got[("noisy", "t1")].kl_mean > 0 and got[("noisy", "t1")].n_tokens == 6
    source = ModelSource(preset="micro", seed=7)
    base = BuiltinEngine(BuiltinEngineConfig(source=source), pool)
    noisy = BuiltinEngine(BuiltinEngineConfig(source=source, perturb=Perturbation(
        logit_noise=0.5)), pool)
    direct = summarize(exact_fidelity(base, noisy, by_task["t1"]), EXACT)
    assert got[("noisy", "t1")].kl_mean == pytest.approx(direct.kl_mean, rel=1e-9)
    assert got[("bounded", "t2")].kl_mean >= 0.0


def test_unknown_baseline_is_a_one_line_error():
    with pytest.raises(FidelityError, match="baseline 'nope' is not one of the variants"):
        builtin_plan_fidelity({"preset": "micro"}, VARIANTS, "nope", {})
