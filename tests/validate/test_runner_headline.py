"""``v41val run`` with a [speed] table on the builtin micro model: every variant is swept
after its quality pass, the sweep is stored, the stored / analysed / reported headline
equals a recompute from the stored timings (validate.speed called directly, and by
hand), and a rerun does not sweep again (engine calls counted)."""

from __future__ import annotations

import json
import statistics

import numpy as np
import pytest

from reports.document import report_document
from reports.json_report import render_json, validate_document
from validate.analysis import analyze_run
from validate.errors import PlanError
from validate.plan import load_plan, parse_plan
from validate.runner import run_plan
from validate.runner.engines import BuiltinFactory
from validate.runner.speed_pass import speed_pass, sweep_settings
from validate.speed.headline import compare_headlines, headline
from validate.speed.stored import sweep_from_record
from validate.store import ResultsStore

MAX_TOKENS = 4
PLAN = f"""\
name = "headline"
baseline = "exact"
fidelity_prompts = 0

[engine]
kind = "builtin"
preset = "micro"

[variants.exact]
swa = "exact"
[variants.bounded]
swa = "bounded"

[[tasks]]
name = "gsm8k_cot_zeroshot"
limit = 1
max_gen_toks = 3

[speed]
sweep_levels = [1, 2]
target_tokens_per_s = 1.0
user_quantile = 0.25
prompt_tokens = 8
max_tokens = {MAX_TOKENS}
requests_per_level = 3
"""


class CountingFactory(BuiltinFactory):
    """The plan's builtin factory, recording every engine it opens."""

    def __init__(self, plan) -> None:
        super().__init__(plan)
        self.opened: list[str] = []
        self.swept: list[tuple[str, int]] = []

    def open(self, variant):
        self.opened.append(variant.name)
        return super().open(variant)

    def sweep_engine(self, variant, concurrency):
        self.swept.append((variant.name, concurrency))
        return super().sweep_engine(variant, concurrency)


def hand_headline(record: dict, q: float, target: float) -> dict:
    """The headline from the stored per-request timings, written out by hand."""
    levels = {}
    for level in record["levels"]:
        reqs = level["requests"]
        rates = [(r["n_output_tokens"] - 1) / (r["e2e_s"] - r["ttft_s"]) for r in reqs]
        window = (max(r["started_at_s"] + r["e2e_s"] for r in reqs)
                  - min(r["started_at_s"] for r in reqs))
        levels[level["concurrency"]] = {
            "rates": rates, "median_rate": statistics.median(rates),
            "ttft": statistics.median(r["ttft_s"] for r in reqs),
            "thru": sum(r["n_output_tokens"] for r in reqs) / window,
            "q": float(np.quantile(np.asarray(rates, dtype=np.float64), q))}
    meeting = [c for c, v in levels.items() if v["q"] >= target]
    best = max(meeting, key=lambda c: levels[c]["thru"]) if meeting else None
    return {"levels": levels, "best": best}


@pytest.mark.slow  # a real (micro) model on CPU, swept twice per variant: ~5 s on an idle core
def test_plan_with_speed_sweeps_stores_reports_and_resumes(tmp_path):
    path = tmp_path / "plan.toml"
    path.write_text(PLAN)
    plan = load_plan(path)
    with ResultsStore.open(tmp_path / "results.sqlite") as store:
        factory = CountingFactory(plan)
        first = run_plan(plan, store, factory=factory)
        assert first.swept == ("exact", "bounded")
        # an untimed warm-up engine per level, then one fresh engine per measured level,
        # variant after variant
        assert factory.swept == [("exact", 1), ("exact", 2), ("exact", 1), ("exact", 2),
                                 ("bounded", 1), ("bounded", 2), ("bounded", 1), ("bounded", 2)]
        stored = {s.variant: s for s in store.sweeps(plan.hash)}
        assert set(stored) == {"exact", "bounded"}
        sweeps = {}
        for v, s in stored.items():
            assert s.settings == sweep_settings(plan) == {**plan.speed.to_dict(), "seed": 0}
            assert [lv["concurrency"] for lv in s.sweep["levels"]] == [1, 2]
            for lv in s.sweep["levels"]:
                assert lv["n_failed"] == 0 and len(lv["requests"]) == 3
                # EOS ignored: every request produced exactly max_tokens tokens
                assert {r["n_output_tokens"] for r in lv["requests"]} == {MAX_TOKENS}
            sweeps[v] = sweep_from_record(s.sweep)
            # the stored headline is validate.speed's headline of the stored timings ...
            assert s.headline == json.loads(json.dumps(headline(sweeps[v], v).to_dict()))
            # ... and a hand recompute from the same timings
            ref = hand_headline(s.sweep, 0.25, 1.0)
            assert s.headline["concurrency_at_target"] == ref["best"]
            assert ref["best"] is not None
            one, best = ref["levels"][1], ref["levels"][ref["best"]]
            assert s.headline["single_stream_tokens_per_s"] == pytest.approx(one["median_rate"],
                                                                            rel=1e-12)
            assert s.headline["single_stream_ttft_s"] == pytest.approx(one["ttft"], rel=1e-12)
            assert s.headline["throughput_at_target"] == pytest.approx(best["thru"], rel=1e-12)
            assert s.headline["tokens_per_s_per_user_at_target"] == pytest.approx(best["q"],
                                                                                  rel=1e-12)
        assert stored["exact"].comparison is None
        cmp = compare_headlines(sweeps["exact"], sweeps["bounded"], variant_name="bounded",
                                baseline_name="exact").to_dict()
        assert stored["bounded"].comparison == json.loads(json.dumps(cmp))
        base_rates = hand_headline(stored["exact"].sweep, 0.25, 1.0)["levels"][1]["rates"]
        cand_rates = hand_headline(stored["bounded"].sweep, 0.25, 1.0)["levels"][1]["rates"]
        ratio = stored["bounded"].comparison["single_stream_speedup"]
        assert ratio["ratio"] == pytest.approx(np.median(cand_rates) / np.median(base_rates),
                                               rel=1e-9)
        assert ratio["ci"][0] <= ratio["ratio"] <= ratio["ci"][1] and ratio["n"] == 3

        # the analysis and the report show the stored numbers
        analysis = analyze_run(store)
        assert [h.to_dict() for h in analysis.headline.headlines] == [
            stored["exact"].headline, stored["bounded"].headline]
        assert [c.to_dict() for c in analysis.headline.comparisons] == [
            stored["bounded"].comparison]
        doc = json.loads(render_json(report_document(analysis)))
        validate_document(doc)
        for reported in doc["headline"]["variants"]:
            want = stored[reported["variant"]].headline
            for key in ("single_stream_tokens_per_s", "single_stream_ttft_s",
                        "throughput_at_target", "concurrency_at_target",
                        "tokens_per_s_per_user_at_target"):
                assert reported[key] == want[key], key
        [reported_cmp] = doc["headline"]["comparisons"]
        assert reported_cmp["throughput_ratio"]["ratio"] == (
            stored["bounded"].comparison["throughput_ratio"]["ratio"])

        # resume: nothing to answer, nothing to sweep, the stored sweeps untouched
        again = CountingFactory(plan)
        second = run_plan(plan, store, factory=again)
        assert second.swept == () and again.swept == [] and again.opened == []
        assert {s.variant: s.stored_at for s in store.sweeps(plan.hash)} == {
            v: s.stored_at for v, s in stored.items()}

        # other sweep settings (same plan hash): swept anew, and only those are reported
        changed = load_plan(_write(tmp_path, PLAN.replace("sweep_levels = [1, 2]",
                                                          "sweep_levels = [1]")))
        assert changed.hash == plan.hash
        third_factory = CountingFactory(changed)
        third = run_plan(changed, store, factory=third_factory)
        assert third.swept == ("exact", "bounded") and third_factory.opened == []
        assert third_factory.swept == [("exact", 1), ("exact", 1), ("bounded", 1),
                                       ("bounded", 1)]
        latest = analyze_run(store).headline
        assert latest.settings["sweep_levels"] == [1]
        assert [p.concurrency for p in latest.points["bounded"]] == [1]


def _write(tmp_path, text: str):
    path = tmp_path / "plan2.toml"
    path.write_text(text)
    return path


def _doc(speed: dict | None) -> dict:
    d = {"name": "s", "baseline": "a", "engine": {"kind": "builtin", "preset": "micro"},
         "variants": {"a": {}}, "tasks": [{"name": "gsm8k", "limit": 1}]}
    if speed is not None:
        d["speed"] = speed
    return d


class NoSweepFactory:
    kind = "custom"


def test_no_speed_table_means_no_sweep_and_no_engine(tmp_path):
    plan = parse_plan(_doc(None), "p.toml")
    with ResultsStore.open(tmp_path / "results.sqlite") as store:
        run = store.begin_run(plan.hash, plan_name="s", identity={"git": None})
        assert speed_pass(plan, store, run, NoSweepFactory(), "a") is False
        assert store.sweeps(plan.hash) == []


def test_a_factory_without_sweep_engines_is_a_one_line_error(tmp_path):
    plan = parse_plan(_doc({"sweep_levels": [1]}), "plans/s.toml")
    with ResultsStore.open(tmp_path / "results.sqlite") as store:
        run = store.begin_run(plan.hash, plan_name="s", identity={"git": None})
        with pytest.raises(PlanError, match=r"^plans/s.toml: speed: the custom engine cannot "
                                            r"open one engine per concurrency level"):
            speed_pass(plan, store, run, NoSweepFactory(), "a")
        assert store.sweeps(plan.hash) == []
