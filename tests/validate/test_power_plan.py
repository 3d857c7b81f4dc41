"""Power and sample size for the gate, and ``v41val plan`` (library and CLI)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import optimize, stats

from v41val.cli import main
from validate.stats import plan_noninferiority, task_size
from validate.stats.power import (
    noninferiority_mde,
    noninferiority_power,
    noninferiority_power_exact,
    noninferiority_sample_size,
)
from validate.stats.score_interval import score_z


def hand_power(n, disc, margin, alpha, delta):
    """Normal-approximation power written out independently: the constrained p_b is
    found by maximising the *expected* log-likelihood numerically."""
    p_b, p_c = (disc - delta) / 2, (disc + delta) / 2
    theta0 = -margin

    def neg(q):
        return -(p_b * math.log(q) + p_c * math.log(q + theta0)
                 + (1 - disc) * math.log(1 - 2 * q - theta0))

    q0 = optimize.minimize_scalar(neg, bounds=(margin + 1e-12, 0.5 - 1e-9), method="bounded",
                                  options={"xatol": 1e-13}).x
    var0 = 2 * q0 + theta0 * (1 - theta0)
    var1 = p_b + p_c - (p_c - p_b) ** 2
    z = stats.norm.ppf(1 - alpha)
    return stats.norm.cdf(((delta + margin) * math.sqrt(n) - z * math.sqrt(var0)) / math.sqrt(var1))


@pytest.mark.parametrize(
    "n,disc,margin,delta",
    [(1319, 0.03, 0.01, 0.0), (448, 0.05, 0.02, -0.01), (198, 0.1, 0.04, 0.02)],
)
def test_normal_power_matches_hand_formula(n, disc, margin, delta):
    ours = noninferiority_power(n, disc, margin, 0.05, delta)
    assert ours == pytest.approx(hand_power(n, disc, margin, 0.05, delta), abs=1e-6)


def test_exact_power_matches_brute_force_enumeration():
    n, disc, margin, delta, alpha = 40, 0.2, 0.1, 0.0, 0.05
    p_b, p_c = (disc - delta) / 2, (disc + delta) / 2
    z = stats.norm.ppf(1 - alpha)
    total = 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            if float(score_z(b, c, n, -margin)) >= z:
                total += stats.multinomial.pmf([b, c, n - b - c], n, [p_b, p_c, 1 - disc])
    assert noninferiority_power_exact(n, disc, margin, alpha, delta) == pytest.approx(total, abs=1e-9)


@pytest.mark.parametrize("disc,margin,power", [(0.03, 0.01, 0.8), (0.1, 0.03, 0.9)])
def test_sample_size_is_the_smallest_n_reaching_power(disc, margin, power):
    n = noninferiority_sample_size(disc, margin, 0.05, power)
    assert noninferiority_power(n, disc, margin, 0.05) >= power
    assert noninferiority_power(n - 1, disc, margin, 0.05) < power
    mde = noninferiority_mde(n, disc, 0.05, power)
    assert mde <= margin + 1e-9
    assert noninferiority_power(n, disc, mde, 0.05) == pytest.approx(power, abs=1e-7)
    assert noninferiority_sample_size(disc, margin, 0.05, power, true_delta=-margin) is None


def test_mde_of_a_candidate_that_is_never_worse_is_zero():
    """b = 0 (every discordant item favours the candidate, D = delta): power reaches the
    target already at a vanishing margin, so the smallest certifiable margin is 0 (this
    used to be an internal error: no sign change for the root finder)."""
    assert noninferiority_power(400, 0.0175, 1e-9, 0.05, 0.0175) >= 0.8
    assert noninferiority_mde(400, 0.0175, 0.05, 0.8, true_delta=0.0175) == 0.0


def test_plan_cli_with_a_candidate_that_is_never_worse(capsys):
    from v41val.cli import main

    main(["plan", "--margin", "2", "--discordance", "0.0175", "--delta", "1.75", "--n", "400",
          "--json"])  # returns (exit 0) instead of an internal error
    out = capsys.readouterr()
    assert "internal error" not in out.err
    assert json.loads(out.out)["mde_margin_at_full"] == 0.0


def test_task_size_from_tasks_package_then_fallback_and_override():
    import tasks

    assert task_size("gsm8k") == len(tasks.get("gsm8k").items()) == 1319
    assert task_size("gsm8k_cot_llama") == 1319
    assert task_size("gpqa_diamond_cot_zeroshot") == 198
    assert task_size("gpqa_main_n_shot") == 448
    assert task_size("gpqa_extended") == 546
    assert task_size("gsm8k", n=250) == 250


def run_cli(capsys, *args):
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out = capsys.readouterr()
    return info.value.code, out.out, out.err


def run_ok(capsys, *args):
    main(list(args))
    return capsys.readouterr().out


def test_plan_cli_json(capsys):
    out = run_ok(capsys, "plan", "--task", "gsm8k", "--margin", "1.0", "--discordance", "0.03",
                 "--alpha", "0.05", "--power", "0.8", "--json")
    doc = json.loads(out)
    assert doc["n_full"] == 1319
    expected_n = noninferiority_sample_size(0.03, 0.01, 0.05, 0.8)
    assert doc["n_needed"] == expected_n
    assert doc["power_at_full_normal"] == pytest.approx(hand_power(1319, 0.03, 0.01, 0.05, 0.0), abs=1e-6)
    assert doc["mde_difference_at_full"] == pytest.approx(2.8016 * math.sqrt(0.03 / 1319), rel=1e-3)
    assert doc["fits"] is (expected_n <= 1319)
    assert "Tango" in doc["test"]
    text = run_ok(capsys, "plan", "--task", "gpqa_diamond", "--margin", "5", "--discordance", "0.1")
    assert "n=198" in text and "alpha=0.05" in text and "MDE" in text


def test_plan_cli_bad_input_is_exit_2_one_line(capsys):
    code, out, err = run_cli(capsys, "plan", "--task", "gsm8k", "--margin", "1.0")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("v41val: error:") and "--discordance" in err
    code, _, err = run_cli(capsys, "plan", "--task", "mmlu", "--margin", "1", "--discordance", "0.02")
    assert code == 2 and "--n" in err
    code, _, err = run_cli(capsys, "plan", "--n", "100", "--margin", "1", "--discordance", "1.5")
    assert code == 2 and "discordance" in err


def write_samples(path, outcomes, task="gsm8k_x", filters=("strict-match", "flexible-extract")):
    """An lm-eval-shaped samples file: one line per (doc, filter)."""
    lines = []
    for doc_id, value in enumerate(outcomes):
        for filt in filters:
            lines.append(json.dumps({
                "doc_id": doc_id, "doc": {}, "target": "1", "arguments": {},
                "resps": [["#### 1" if value else "#### 2"]],
                "filtered_resps": ["1" if value else "2"], "filter": filt,
                "metrics": ["exact_match"], "doc_hash": f"d{doc_id}",
                "prompt_hash": f"p{doc_id}", "target_hash": "t", "exact_match": float(value),
            }))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_plan_from_aa_uses_the_observed_discordance(tmp_path, capsys):
    rng = np.random.default_rng(3)
    a = (rng.random(300) < 0.85).astype(int)
    b = a.copy()
    flip = rng.choice(300, size=9, replace=False)
    b[flip] = 1 - b[flip]
    fa = write_samples(tmp_path / "samples_gsm8k_x_2026-01-01T00-00-00.000001.jsonl", a)
    fb = write_samples(tmp_path / "other.jsonl", b)
    fb = fb.rename(tmp_path / "samples_gsm8k_x_2026-01-02T00-00-00.000001.jsonl")
    out = run_ok(capsys, "plan", "--margin", "2", "--from-aa", str(fa), str(fb),
                 "--metric", "exact_match,strict-match", "--json")
    doc = json.loads(out)
    assert doc["discordance"] == pytest.approx(9 / 300)
    assert doc["n_full"] == 1319  # task gsm8k_x -> the gsm8k prefix
    lib = plan_noninferiority("gsm8k_x", 1319, 0.02, 9 / 300)
    assert doc["n_needed"] == lib.n_needed
    assert doc["power_at_full"] == pytest.approx(lib.power_at_full, rel=1e-12)
    code, _, err = run_cli(capsys, "plan", "--margin", "2", "--from-aa", str(fa), str(fb))
    assert code == 2 and "exact_match,flexible-extract" in err
