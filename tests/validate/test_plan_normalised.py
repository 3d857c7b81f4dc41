"""A variant's identity is its normalised options: equivalent wordings of one plan get
one hash, a rerun of either resumes, and a store written by v41val 0.1 (whose hash
covered the options as written) still opens and resumes.

``fixtures/legacy-store-v0.1.sqlite`` was written by the code at d9d9954 running
``fixtures/legacy-plan.toml`` (micro preset, 3 GSM8K items, 2 variants)."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import pytest

from validate.analysis import analyze_run
from validate.plan import load_plan, parse_plan
from validate.runner import run_plan
from validate.store import ResultsStore

FIXTURES = Path(__file__).parent / "fixtures"
LEGACY_HASH = "35be0d8b21fe65fe08d5fa15a80dc9ae5fb459aca9664d5a4376ca9d5d97fd51"


class NoEngine:
    """A factory that fails the test if the runner asks for any response."""

    kind = "builtin"

    @contextlib.contextmanager
    def open(self, variant):
        pytest.fail(f"the rerun asked the engine for {variant.name}: it did not resume")
        yield


def doc(bounded: dict) -> dict:
    return {"name": "eq", "baseline": "exact",
            "engine": {"kind": "builtin", "preset": "micro"},
            "variants": {"exact": {"swa": "exact"}, "bounded": bounded},
            "tasks": [{"name": "gsm8k", "limit": 2}]}


def test_equivalent_wordings_hash_alike():
    short = parse_plan(doc({"swa": "bounded"}))
    spelled = parse_plan(doc({"swa": "bounded", "encoder_replay": True, "decoder_trim": True,
                              "kernels": "none", "cut": "after"}))
    assert short.hash == spelled.hash
    assert short.legacy_hash != spelled.legacy_hash  # what v41val 0.1 did
    assert short.identity()["variants"]["bounded"]["options"]["encoder_replay"] is True
    different = parse_plan(doc({"swa": "bounded", "decoder_trim": False}))
    assert different.hash != short.hash
    kernels = [parse_plan(doc({"kernels": k})).hash for k in ("+gate,+mhc", "+mhc,+gate")]
    assert kernels[0] == kernels[1]


@pytest.fixture()
def legacy_store(tmp_path) -> Path:
    path = tmp_path / "results.sqlite"
    shutil.copy(FIXTURES / "legacy-store-v0.1.sqlite", path)
    return path


def test_a_store_written_by_the_previous_version_opens_as_it_was(legacy_store):
    with ResultsStore.open(legacy_store) as store:
        analysis = analyze_run(store, LEGACY_HASH)
    assert analysis.identity.plan_hash == LEGACY_HASH
    assert set(analysis.variants) == {"exact", "bounded"}
    # the report says what each variant is in today's normalised form
    assert analysis.variant_configs["bounded"]["options"]["decoder_trim"] is True


def test_a_rerun_of_either_wording_resumes_a_legacy_store(legacy_store, tmp_path):
    plan = load_plan(FIXTURES / "legacy-plan.toml")
    assert plan.legacy_hash == LEGACY_HASH and plan.hash != LEGACY_HASH
    spelled = tmp_path / "spelled.toml"
    spelled.write_text((FIXTURES / "legacy-plan.toml").read_text().replace(
        'swa = "bounded"', 'swa = "bounded"\nencoder_replay = true\ndecoder_trim = true'))
    for path in (FIXTURES / "legacy-plan.toml", spelled):
        again = load_plan(path)
        assert again.hash == plan.hash
        with ResultsStore.open(legacy_store) as store:
            outcome = run_plan(again, store, factory=NoEngine())
            assert [v.sent for v in outcome.variants] == [0, 0]
            assert [v.already_stored for v in outcome.variants] == [3, 3]
            assert store.runs(LEGACY_HASH) == []
            configs = {v.name: v.config for v in store.variants(plan.hash)}
            assert configs["bounded"]["options"]["encoder_replay"] is True
            analysis = analyze_run(store, plan.hash)
    assert len(analysis.identity.run_ids) == 3  # the legacy run and the two reruns
