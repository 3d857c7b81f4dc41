"""``[speed] rounds`` in a plan: interleaved speed rounds of all variants after their
quality passes, stored per plan, analysed into speed-ups with round-clustered
intervals, reported, and not measured again by a rerun."""

from __future__ import annotations

import pytest

from validate.analysis import analyze_run
from validate.errors import PlanError
from validate.plan import load_plan, parse_plan
from validate.runner import run_plan
from validate.speed.interleaved import rounds_from_record
from validate.store import ResultsStore

pytestmark = pytest.mark.slow  # a (micro) model on CPU: a few seconds

PLAN = """\
name = "rounds"
baseline = "a"
concurrency = 2
fidelity_prompts = 0
[engine]
kind = "builtin"
preset = "micro"
[variants.a]
swa = "exact"
[variants.b]
swa = "exact"
[[tasks]]
name = "gsm8k_cot_zeroshot"
limit = 1
max_gen_toks = 2
[speed]
sweep_levels = [1, 2]
prompt_tokens = 16
max_tokens = 4
requests_per_level = 4
rounds = 4
"""


def test_rounds_are_measured_stored_analysed_and_reused(tmp_path):
    path = tmp_path / "plan.toml"
    path.write_text(PLAN)
    plan = load_plan(path)
    assert plan.speed.rounds == 4
    with ResultsStore.open(tmp_path / "r.sqlite") as store:
        run_plan(plan, store)
        settings, record = store.rounds(plan.hash)
        measured = rounds_from_record(record)
        assert [m.variant for m in measured] == ["a", "b", "b", "a", "a", "b", "b", "a"]
        assert all(len(m.indexed) == 4 and m.n_failed == 0 for m in measured)
        assert settings["concurrency"] == 2 and settings["rounds"] == 4
        run_plan(plan, store)  # same settings: not measured again
        assert store.rounds(plan.hash) == (settings, record)
        analysis = analyze_run(store)
    [b] = analysis.interleaved
    assert (b.variant, b.rounds, b.concurrency) == ("b", 4, 2)
    assert {s.metric for s in b.speedups} == {"ttft", "tpot", "e2e"}
    assert all(s.n == 4 and s.ci[0] <= s.ratio <= s.ci[1] for s in b.speedups)
    from reports.document import report_document
    from reports.markdown import render_markdown

    doc = report_document(analysis)
    assert doc["interleaved"][0]["speedups"]["e2e"]["n"] == 4
    assert "Interleaved speed rounds" in render_markdown(doc)
    # the sweep beside the rounds is found (its key leaves rounds out, as the runner's)
    assert analysis.headline is not None and not any("no stored sweep" in n
                                                     for n in analysis.notes)


def test_rounds_alone_without_a_sweep(tmp_path):
    """``sweep_levels = []``: the rounds are measured, no variant is swept, and the
    report says the headline was not measured instead of asking for a rerun."""
    path = tmp_path / "plan.toml"
    path.write_text(PLAN.replace("sweep_levels = [1, 2]", "sweep_levels = []"))
    plan = load_plan(path)
    with ResultsStore.open(tmp_path / "r.sqlite") as store:
        run_plan(plan, store)
        assert store.sweeps(plan.hash) == [] and store.rounds(plan.hash) is not None
        analysis = analyze_run(store)
    assert analysis.headline is None and len(analysis.interleaved) == 1
    assert not any("no stored sweep" in n for n in analysis.notes)


def test_bad_rounds_and_vllm_are_refused(tmp_path):
    doc = {"name": "p", "baseline": "a", "engine": {"kind": "builtin", "preset": "micro"},
           "variants": {"a": {}, "b": {}}, "tasks": [{"name": "gsm8k"}],
           "speed": {"rounds": -1}}
    with pytest.raises(PlanError, match="speed.rounds: expected >= 0, got -1"):
        parse_plan(doc, "plan.toml")
    from validate.runner.rounds_pass import rounds_pass

    vllm = parse_plan({**doc, "engine": {"kind": "vllm", "model": "/m"},
                       "variants": {"a": {"args": []}, "b": {"args": []}},
                       "speed": {"rounds": 2}}, "plan.toml")

    class Factory:
        kind = "vllm"

    with ResultsStore.open(tmp_path / "r.sqlite") as store:
        run = store.begin_run(vllm.hash, identity={})
        with pytest.raises(PlanError, match="speed.rounds: interleaved rounds need every"):
            rounds_pass(vllm, store, run, Factory())
