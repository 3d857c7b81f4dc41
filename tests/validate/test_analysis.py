"""The analysis of a stored run, checked against independent recomputations: accuracies
from the raw SQLite rows, Holm over the (variant x task) family against statsmodels,
flips, exit codes, floor detection."""

from __future__ import annotations

import importlib.util
import math
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats
from statsmodels.stats.multitest import multipletests

from validate.analysis import analyze_run
from validate.gate.evidence import ScoreEvidence
from validate.gate.policy import parse_policy
from validate.plan import load_plan
from validate.runner import run_plan
from validate.store import ResultsStore

HERE = Path(__file__).parent
TASKS = ("gsm8k", "gsm8k_cot_zeroshot")
LIMIT = 30
METRIC = "exact_match,strict-match"


def _server_module():
    name = "v41val_runner_test_server"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "test_runner_server.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


srv = _server_module()
POLICY = ('[policy]\ngate = { alpha = 0.05, correction = "holm" }\n'
          f'tasks.gsm8k = {{ margin = 10.0, metric = "{METRIC}" }}\n'
          f'tasks.gsm8k_cot_zeroshot = {{ margin = 10.0, metric = "{METRIC}" }}\n')


@pytest.fixture(scope="module")
def server():
    s = srv.RunnerServer().start()
    srv.load_golds(s.state, TASKS, LIMIT)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def stored(tmp_path_factory, server):
    tmp = tmp_path_factory.mktemp("analysis")
    path = tmp / "plan.toml"
    path.write_text(srv.plan_text(server.base_url, {"base": "acc60", "near": "acc55",
                                                    "far": "acc30"}, "base", TASKS, LIMIT,
                                  POLICY, concurrency=8))
    plan = load_plan(path)
    store = ResultsStore.open(tmp / "results.sqlite")
    run_plan(plan, store)
    yield plan, store
    store.close()


def raw_scores(db: Path, metric: str) -> dict[tuple[str, str], dict[str, float]]:
    """(variant, task) -> {item_id: score}, straight from the SQLite file."""
    out: dict = {}
    with sqlite3.connect(db) as conn:
        for variant, task, item, score in conn.execute(
                "SELECT r.variant, r.task, r.item_id, c.score FROM scores c"
                " JOIN requests r ON r.request_id = c.request_id WHERE c.filter = ?", (metric,)):
            out.setdefault((variant, task), {})[item] = score
    return out


def test_accuracies_equal_a_recompute_from_the_stored_scores(stored):
    plan, store = stored
    analysis = analyze_run(store)
    raw = raw_scores(store.path, METRIC)
    assert len(analysis.summaries) == 3 * len(TASKS)
    for s in analysis.summaries:
        values = list(raw[(s.variant, s.task)].values())
        n = len(values)
        p = math.fsum(values) / n
        assert s.metric == METRIC and s.n == n == LIMIT
        assert s.accuracy.mean == pytest.approx(p, abs=1e-12)
        assert s.accuracy.se == pytest.approx(math.sqrt(p * (1 - p) / (n - 1)), rel=1e-12)
        assert s.health.coverage == 1.0 and s.health.invalid_rate == 0.0
    # the server's script, by hand: right exactly on prompts in buckets below the level
    import tasks

    for task_name in TASKS:
        task = tasks.get(task_name)
        right = [srv.bucket(task.render(i).prompt) < 55 for i in task.items()[:LIMIT]]
        assert analysis.summary("near", task_name).accuracy.mean == pytest.approx(np.mean(right))


def test_holm_over_the_variant_task_family_equals_statsmodels(stored):
    plan, store = stored
    analysis = analyze_run(store)
    raw = raw_scores(store.path, METRIC)
    rows = [r for r in analysis.comparisons if r.verdict.verdict != "INVALID"]
    assert len(rows) == 4 and analysis.policy.family_size == 4
    raw_p = []
    for r in rows:
        base, cand = raw[("base", r.task)], raw[(r.variant, r.task)]
        b = sum(1 for i in base if base[i] == 1 and cand[i] == 0)
        c = sum(1 for i in base if base[i] == 0 and cand[i] == 1)
        # the PASS p: the score test's, or scipy's exact binomial at the never-better
        # edge where larger (validate.stats.score_interval)
        edge = float(scipy_stats.binom.cdf(b - c, len(base), 0.10)) if b >= c else 0.0
        expected_p = max(ScoreEvidence(b=b, c=c, n=len(base)).p_greater(-0.10), edge)
        assert r.verdict.p_noninferior == pytest.approx(expected_p, rel=1e-12)
        raw_p.append(r.verdict.p_noninferior)
        assert sorted(r.flips_to_wrong) == sorted(f"{i}#0" for i in base
                                                  if base[i] == 1 and cand[i] == 0)
        assert len(r.flips_to_right) == c
        assert r.comparison.paired.delta == pytest.approx((c - b) / len(base))
    reject, adjusted, _, _ = multipletests(raw_p, alpha=0.05, method="holm")
    got = [r.verdict.p_noninferior_adjusted for r in rows]
    assert got == pytest.approx(list(adjusted), rel=1e-12)
    # PASS exactly where statsmodels rejects non-inferiority's null
    assert [r.verdict.verdict in ("PASS", "WARN") for r in rows] == list(reject)


def test_decision_and_exit_code_follow_the_family(stored):
    plan, store = stored
    analysis = analyze_run(store)
    words = {(r.variant, r.task): r.verdict.verdict for r in analysis.comparisons}
    for variant in ("near", "far"):
        mine = [words[(variant, t)] for t in TASKS]
        expected = ("NO-GO" if "FAIL" in mine else
                    "INCONCLUSIVE" if any(w not in ("PASS", "WARN") for w in mine) else "GO")
        assert analysis.variant_decisions[variant] == expected
    assert analysis.decision in analysis.variant_decisions.values()
    assert analysis.exit_code == {"GO": 0, "NO-GO": 1, "INCONCLUSIVE": 3}[analysis.decision]
    # a stricter policy given at analysis time changes verdicts, not the stored run
    strict = parse_policy({"gate": {"correction": "bonferroni"},
                           "tasks": {t: {"margin": 0.5, "metric": METRIC} for t in TASKS}})
    again = analyze_run(store, plan.hash[:10], policy=strict)
    assert again.policy.correction == "bonferroni"
    assert all(r.verdict.verdict != "PASS" for r in again.comparisons if r.variant == "far")


def test_without_a_policy_the_run_is_ungated_unless_broken(tmp_path, server):
    path = tmp_path / "plan.toml"
    path.write_text(srv.plan_text(server.base_url, {"base": "acc60", "far": "acc0",
                                                    "empty": "empty"}, "base", TASKS[:1], LIMIT))
    plan = load_plan(path)
    with ResultsStore.open(tmp_path / "results.sqlite") as store:
        run_plan(plan, store)
        analysis = analyze_run(store)
    far, empty = analysis.comparison("far", "gsm8k"), analysis.comparison("empty", "gsm8k")
    assert analysis.policy is None and far.verdict is None and far.status == "NOT-GATED"
    assert far.comparison.paired.delta == pytest.approx(-analysis.summary("base", "gsm8k").accuracy.mean)
    assert empty.status == "INVALID" and any("empty-output" in r for r in empty.health_failures)
    assert analysis.variant_decisions == {"far": "UNGATED", "empty": "INVALID"}
    assert analysis.decision == "INVALID" and analysis.exit_code == 4


def test_a_baseline_at_the_floor_is_said_plainly(tmp_path, server):
    path = tmp_path / "plan.toml"
    path.write_text(srv.plan_text(server.base_url, {"base": "acc0", "cand": "acc60"}, "base",
                                  TASKS[:1], LIMIT))
    with ResultsStore.open(tmp_path / "results.sqlite") as store:
        run_plan(load_plan(path), store)
        analysis = analyze_run(store)
    assert analysis.floor_tasks == ("gsm8k",)
    assert any("gsm8k: the baseline scores 0.0 %" in n and "fidelity" in n
               for n in analysis.notes)
    assert analysis.decision == "UNGATED" and analysis.exit_code == 0


def test_analysis_serialises_to_strict_json(stored):
    import json

    plan, store = stored
    d = analyze_run(store).to_dict()
    text = json.dumps(d, allow_nan=False)
    back = json.loads(text)
    assert back["identity"]["plan_hash"] == plan.hash and back["schema"] == "v41val.analysis/1"
    assert back["variant_configs"]["far"] == {"endpoint": {"model": "acc30"}}
    row = next(r for r in back["comparisons"] if r["variant"] == "far")
    assert row["verdict"]["verdict"] == row["status"]
    assert {s["metric"] for s in row["speedups"]} >= {"e2e"}
    summary = back["summaries"][0]
    assert summary["speed"]["concurrency"] == 8 and summary["health"]["coverage"] == 1.0
