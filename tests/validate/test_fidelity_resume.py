"""A fidelity pass killed inside one (variant, task) resumes after its last saved batch:
the rerun teacher-forces only the prompts not saved, and its records equal those of an
uninterrupted pass; the store keeps the partial records out of the document."""

from __future__ import annotations

import pytest

from tasks.request import GenerationParams, Request
from validate.engines.builtin import BuiltinEngine, BuiltinEngineConfig
from validate.engines.builtin_source import ModelSource, WeightsPool
from validate.fidelity.collect import exact_fidelity
from validate.fidelity.summary import PromptFidelity
from validate.perturb import Perturbation
from validate.store import ResultsStore

pytestmark = pytest.mark.slow  # three fidelity passes of the micro model

SOURCE = ModelSource(preset="micro", seed=11)
SETTINGS = {"prompts": 6, "tokens": 3}


class Counting:
    """A variant engine that counts teacher-forced batches and can be killed in one."""

    def __init__(self, engine, kill_at: int | None = None) -> None:
        self.engine, self.kill_at, self.calls = engine, kill_at, 0

    def teacher_forced(self, prompts, forced):
        self.calls += 1
        if self.calls == self.kill_at:
            raise KeyboardInterrupt
        return self.engine.teacher_forced(prompts, forced)


@pytest.fixture(scope="module")
def engines():
    pool = WeightsPool()
    base = BuiltinEngine(BuiltinEngineConfig(source=SOURCE), pool)
    noisy = BuiltinEngine(BuiltinEngineConfig(source=SOURCE,
                                              perturb=Perturbation(logit_noise=0.3)), pool)
    return base, noisy


def _requests() -> list[Request]:
    return [Request("t", f"t-{k:02d}", "generate", prompt=f"Prompt number {k} says hello.",
                    gen=GenerationParams(max_gen_toks=3)) for k in range(6)]


def test_a_killed_pair_resumes_after_its_last_saved_batch(engines, tmp_path):
    base, noisy = engines
    clean = exact_fidelity(base, noisy, _requests(), batch=2)
    saved: list[list[PromptFidelity]] = []
    killed = Counting(noisy, kill_at=3)
    with pytest.raises(KeyboardInterrupt):
        exact_fidelity(base, killed, _requests(), batch=2, on_records=saved.append)
    assert [len(s) for s in saved] == [2, 4]  # two batches saved before the kill
    with ResultsStore.open(tmp_path / "r.sqlite") as store:  # through the store's rows
        store.put_fidelity("p" * 64, "noisy", "t", settings=SETTINGS, method="exact",
                           records=[r.to_dict() for r in saved[-1]], complete=False)
        assert store.fidelity_document("p" * 64) == {}  # partial: not a result
        prior = [PromptFidelity.from_dict(r)
                 for r in store.fidelity_partial("p" * 64, "noisy", "t", SETTINGS)]
        assert store.fidelity_partial("p" * 64, "noisy", "t", {"prompts": 1}) == []
        resumed_engine = Counting(noisy)
        resumed = exact_fidelity(base, resumed_engine, _requests(), batch=2, prior=prior)
        store.put_fidelity("p" * 64, "noisy", "t", settings=SETTINGS, method="exact",
                           records=[r.to_dict() for r in resumed])
        assert store.fidelity_partial("p" * 64, "noisy", "t", SETTINGS) == []
        assert len(store.fidelity_document("p" * 64)["records"]["noisy"]["t"]) == 6
    assert resumed_engine.calls == 1  # only the last 2 prompts again
    assert [r.item_id for r in resumed] == [r.item_id for r in clean]
    for got, want in zip(resumed, clean, strict=True):
        assert got.top1 == want.top1
        assert got.kl == pytest.approx(want.kl, rel=1e-12, abs=1e-15)
