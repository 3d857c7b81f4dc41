"""The runner on the builtin engine (the runtime in process, ``micro`` preset): shared
weights, resume, and the fidelity pass (exact KL 0 for an identical variant, > 0 for a
planted degradation)."""

from __future__ import annotations

import pytest

from validate.analysis import analyze_run
from validate.plan import load_plan
from validate.progress import Recorder
from validate.runner import run_plan
from validate.runner.engines import BuiltinFactory
from validate.store import ResultsStore

pytestmark = pytest.mark.slow  # a real (micro) model on CPU: tens of seconds

PLAN = """\
name = "builtin-runner"
baseline = "exact"
warm = true
fidelity_prompts = 1
fidelity_tokens = 3

[engine]
kind = "builtin"
preset = "micro"

[variants.exact]
swa = "exact"
[variants.same]
swa = "exact"
[variants.noisy]
swa = "exact"
perturb = { logit_noise = 3.0 }

[[tasks]]
name = "gsm8k_cot_zeroshot"
limit = 1
max_gen_toks = 4
"""


class CountingFactory(BuiltinFactory):
    def __init__(self, plan) -> None:
        super().__init__(plan)
        self.opened: list[str] = []

    def open(self, variant):
        self.opened.append(variant.name)
        return super().open(variant)


def test_builtin_plan_runs_resumes_and_measures_fidelity(tmp_path):
    path = tmp_path / "plan.toml"
    path.write_text(PLAN)
    plan = load_plan(path)
    with ResultsStore.open(tmp_path / "results.sqlite") as store:
        factory = CountingFactory(plan)
        seen = Recorder()
        first = run_plan(plan, store, factory=factory, progress=seen)
        assert seen.labels() == [f"{v}: {phase}" for v in ("exact", "same", "noisy")
                                 for phase in ("starting the engine", "priming", "quality")
                                 ] + ["fidelity"]
        fidelity = [(e.kind, e.done, e.total) for e in seen.events if e.label == "fidelity"]
        assert fidelity[0] == ("open", 0.0, 2)  # shown before its first (variant, task)
        assert fidelity[-1] == ("close", 2, 2)
        # moved within each pair (targets, then each batch), never backwards
        done = [d for _, d, _ in fidelity]
        assert done == sorted(done) and 0 < done[1] < 1 and 1 in done
        assert seen.final("exact: priming") == (1, 1) and seen.final("noisy: quality") == (1, 1)
        assert [v.stored for v in first.variants] == [1, 1, 1]
        assert len(factory._pool) == 1  # one set of weights for every variant
        responses = {(s.key.variant, s.key.item_id): s for s in store.responses(plan.hash)}
        for item in ("gsm8k-test-0000",):
            a, b = responses[("exact", item)], responses[("same", item)]
            assert a.record.engine["output_token_ids"] == b.record.engine["output_token_ids"]
            assert a.record.engine["prefix_hit_tokens"] > 0  # warm: the measured pass hit
        analysis = analyze_run(store)
        same = analysis.summary("same", "gsm8k_cot_zeroshot").fidelity
        noisy = analysis.summary("noisy", "gsm8k_cot_zeroshot").fidelity
        assert same.n_prompts == 1 and same.n_tokens == 3 and same.method == "exact full-vocab"
        assert same.kl_mean == 0.0 and same.top1_agreement == 1.0
        assert noisy.kl_mean > 0.01
        assert analysis.summary("exact", "gsm8k_cot_zeroshot").prefix_hit_rate == 1.0

        again = CountingFactory(plan)
        second = run_plan(plan, store, factory=again)
        assert [v.sent for v in second.variants] == [0, 0, 0] and again.opened == []
