"""History over a real results store: trends, the trailing-baseline flag (paired where
items match) and the speed-drop flag, --since and --plan."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from store_fixture import PlanSpec, add_plan

from reports.history_render import render_history_html
from validate.analysis.history import HistoryOptions, build_history, parse_since
from validate.errors import HistoryInputError
from validate.store import ResultsStore

N = 120


def _stable(rng_seed: int, acc: float = 0.7) -> np.ndarray:
    rng = np.random.default_rng(rng_seed)
    return (rng.random(N) < acc).astype(float)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("history") / "results.sqlite"
    s = ResultsStore.open(path)
    base = _stable(0)
    # Four steady nights (same items, a few flips each), then a bad one: 18 items that
    # were right every night turn wrong, and throughput falls by a third.
    for night in range(4):
        flip = np.random.default_rng(10 + night).choice(N, 3, replace=False)
        vals = base.copy()
        vals[flip] = 1 - vals[flip]
        add_plan(s, PlanSpec(f"h{night}", {"exact": vals}, ttft_s={"exact": 0.2}))
    bad = base.copy()
    right = np.flatnonzero(base == 1)[:18]
    bad[right] = 0.0
    add_plan(s, PlanSpec("h4", {"exact": bad}, ttft_s={"exact": 0.2},
                         tpot_s={"exact": 0.016}))
    add_plan(s, PlanSpec("other0", {"exact": base}, plan_name="weekly"))
    yield s
    s.close()


def test_series_points_and_known_accuracies(store):
    h = build_history(store, HistoryOptions(plan="nightly"))
    (series,) = h.series
    assert (series.plan_name, series.task, series.variant) == ("nightly", "mini_math", "exact")
    assert [p.plan_hash for p in series.points] == [f"h{i}" for i in range(5)]
    assert series.points[-1].accuracy == pytest.approx((base_sum := _stable(0).sum() - 18) / N)
    assert base_sum > 0
    # tokens/s is known exactly: 11 tokens per request, requests back to back.
    e2e = 0.2 + 0.01 * 10
    assert series.points[0].output_tokens_per_s == pytest.approx(11 / e2e)
    assert series.points[0].ttft_mean == pytest.approx(0.2)
    lo, hi = series.points[0].ttft_ci
    assert lo == pytest.approx(0.2) and hi == pytest.approx(0.2)  # constant TTFT: no spread


def test_bad_night_is_flagged_paired_and_steady_nights_are_not(store):
    h = build_history(store, HistoryOptions(plan="nightly", window=4))
    points = h.series[0].points
    assert all(not p.flags for p in points[:4])
    last = points[-1]
    assert last.check.paired and last.check.n_reference_points == 4
    assert any(f.startswith("accuracy") for f in last.flags)
    assert any(f.startswith("throughput") for f in last.flags)
    assert any(f.startswith("TPOT") for f in last.flags)

    # Independent recompute of the paired test: per-item mean of the 4 trailing nights.
    ref = np.mean([_outcomes(store, f"h{i}") for i in range(4)], axis=0)
    cur = _outcomes(store, "h4")
    d = cur - ref
    t = d.mean() / (d.std(ddof=1) / math.sqrt(N))
    assert last.check.delta == pytest.approx(d.mean())
    assert last.check.p_worse == pytest.approx(stats.t.cdf(t, N - 1))
    # throughput ratio: e2e went from 0.30 s to 0.36 s per request of 11 tokens.
    assert last.check.speed_ratio == pytest.approx(0.30 / 0.36)


def _outcomes(store, plan_hash) -> np.ndarray:
    table = store.outcomes(plan_hash, "exact", "mini_math")
    return np.array([r.scores["flexible-extract"] for r in table.rows])


def test_one_trailing_run_uses_the_paired_score_test(store):
    h = build_history(store, HistoryOptions(plan="nightly", window=1))
    last = h.series[0].points[-1]
    assert last.check.test.startswith("paired score")
    assert last.check.p_worse < 0.05


def test_since_and_plan_filters(store):
    assert build_history(store, HistoryOptions(since=parse_since("2999-01-01"))).series == ()
    names = {s.plan_name for s in build_history(store).series}
    assert names == {"nightly", "weekly"}
    with pytest.raises(HistoryInputError, match="no runs of plan 'monthly'"):
        build_history(store, HistoryOptions(plan="monthly"))
    with pytest.raises(HistoryInputError, match="--since"):
        parse_since("last tuesday")


def test_unmatched_items_fall_back_to_an_unpaired_test(tmp_path):
    with ResultsStore.open(tmp_path / "r.sqlite") as s:
        add_plan(s, PlanSpec("a", {"exact": _stable(1)}, item_prefix="x"))
        add_plan(s, PlanSpec("b", {"exact": _stable(2, 0.4)}, item_prefix="y"))
        (series,) = build_history(s).series
    check = series.points[-1].check
    assert not check.paired
    a, b = _stable(1), _stable(2, 0.4)
    se = math.sqrt(a.var(ddof=1) / N + b.var(ddof=1) / N)
    assert check.p_worse == pytest.approx(stats.norm.cdf((b.mean() - a.mean()) / se))


def test_history_json_and_html(store):
    h = build_history(store, HistoryOptions(plan="nightly"))
    d = h.to_dict()
    assert d["format"] == "v41val-history" and len(d["flagged"]) == 1
    page = render_history_html(h)
    assert page.count("<img src=\"data:image/svg+xml;base64,") == 3
    assert "FLAG" in page and "http://" not in page and "<script" not in page


def test_history_terminal_text_says_flag_in_words(store):
    from reports.history_render import history_text

    text = history_text(build_history(store, HistoryOptions(plan="nightly")))
    assert "FLAG: accuracy" in text and "1 flagged point(s)" in text


@pytest.mark.slow
def test_history_page_loads_in_chromium(store, tmp_path):
    from chromium import chromium_binary, load, pixels

    if chromium_binary() is None:
        pytest.skip("chromium not installed (Debian: apt-get install -y chromium)")
    html = tmp_path / "history.html"
    html.write_text(render_history_html(build_history(store, HistoryOptions(plan="nightly"))))
    result = load(html, screenshot=tmp_path / "h.png", size=(1200, 1400))
    assert result.console == ()
    assert pixels(tmp_path / "h.png")[..., :3].std() > 0.05


def test_ttft_mean_ci_is_the_normal_interval():
    from validate.analysis.history import _mean_ci

    values = [0.21, 0.35, 0.18, 0.4, 0.27, 0.33, 0.3]
    mean, (lo, hi) = _mean_ci(values + [None])
    want = stats.norm.interval(0.95, loc=np.mean(values), scale=stats.sem(values))
    assert mean == pytest.approx(np.mean(values))
    assert (lo, hi) == pytest.approx(want)


def test_history_cli_html_and_fail_on_flag(store, tmp_path, capsys):
    from v41val.cli import main

    args = ["history", "--store", str(store.path), "--plan", "nightly", "-f", "html",
            "-o", "trend/index.html", "--out-dir", str(tmp_path)]
    with pytest.raises(SystemExit) as flagged:
        main(args + ["--fail-on-flag"])
    assert flagged.value.code == 1
    assert "FLAG" in (tmp_path / "trend" / "index.html").read_text()
    main(args)  # without --fail-on-flag: exit 0
    with pytest.raises(SystemExit) as bad:
        main(["history", "--store", str(store.path), "--since", "yesterday-ish"])
    assert bad.value.code == 2
    assert capsys.readouterr().err.count("v41val: error:") == 1
