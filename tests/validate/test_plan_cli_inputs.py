"""``v41val plan``'s inputs: one-line exit-2 errors in the flag's own unit, one alpha
range shared with the policy, the A/A floor, and the family/repeats flags."""

from __future__ import annotations

import json

import pytest

from v41val.cli import main
from validate.errors import PolicyError
from validate.gate import parse_policy
from validate.stats.power import noninferiority_power_exact
from validate.stats.power_repeats import clustered_power

BASE = ["plan", "--n", "448", "--margin", "1", "--discordance", "0.03"]


def run(capsys, *args):
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("extra,flag,says", [
    (["--delta", "nan"], "--delta", "finite"),
    (["--delta", "inf"], "--delta", "finite"),
    (["--delta", "5"], "--delta", "5 pts"),
    (["--alpha", "0.6"], "--alpha", "(0, 0.5)"),
    (["--alpha", "0.5"], "--alpha", "(0, 0.5)"),
    (["--power", "1"], "--power", "(0, 1)"),
    (["--claims", "0"], "--claims", ">= 1"),
    (["--correction", "sidak"], "--correction", "holm"),
    (["--repeats", "four"], "--repeats", "TASK=N"),
    (["--repeats", "0"], "--repeats", ">= 1"),
    (["--repeats", "4", "--rho", "1.5"], "--rho", "[0, 1]"),
])
def test_bad_flag_is_one_line_exit_2_naming_it(capsys, extra, flag, says):
    code, out, err = run(capsys, *BASE, *extra)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"v41val: error: {flag}:"), err
    assert says in err


@pytest.mark.parametrize("margin", ["0", "-1", "60", "nan"])
def test_margin_errors_speak_points(capsys, margin):
    code, _, err = run(capsys, "plan", "--n", "448", "--discordance", "0.03",
                       "--margin", margin)
    assert code == 2 and err.startswith("v41val: error: --margin:")
    assert "points" in err and "fraction" not in err


def test_plan_and_policy_say_the_same_alpha_range(capsys):
    _, _, err = run(capsys, *BASE, "--alpha", "0.6")
    with pytest.raises(PolicyError) as info:
        parse_policy({"gate": {"alpha": 0.6}, "tasks": {"t": {"margin": 1}}}, "p.toml")
    assert err.split("--alpha: ", 1)[1].strip() == str(info.value).split("gate.alpha: ", 1)[1]
    with pytest.raises(PolicyError, match=r"\(0, 0\.5\)"):  # was "(0.0, 0.5]" for 0.6
        parse_policy({"gate": {"alpha": 1.5}, "tasks": {"t": {"margin": 1}}})


def write_samples(path, outcomes):
    path.write_text("".join(json.dumps({
        "doc_id": i, "filter": "none", "metrics": ["acc"], "acc": float(v),
        "prompt_hash": f"p{i}"}) + "\n" for i, v in enumerate(outcomes)))
    return path


def test_from_aa_floors_zero_discordance_at_one_item(tmp_path, capsys):
    """A one-item pilot with no disagreement used to give power 1.0."""
    fa = write_samples(tmp_path / "samples_gpqa_main_2026-01-01T00-00-00.jsonl", [1])
    fb = write_samples(tmp_path / "samples_gpqa_main_2026-01-02T00-00-00.jsonl", [1])
    code, out, _ = run(capsys, "plan", "--margin", "2", "--from-aa", str(fa), str(fb), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["discordance"] == 1.0 and "floored" in doc["discordance_source"]
    assert doc["power_at_full"] < 0.5
    (tmp_path / "big").mkdir()
    fa = write_samples(tmp_path / "big" / "samples_gpqa_main_2026-01-01T00-00-00.jsonl",
                       [1] * 200)
    fb = write_samples(tmp_path / "big" / "samples_gpqa_main_2026-01-02T00-00-00.jsonl",
                       [1] * 200)
    code, out, _ = run(capsys, "plan", "--task", "gpqa_main", "--margin", "2",
                       "--from-aa", str(fa), str(fb), "--json")
    doc = json.loads(out)
    assert doc["discordance"] == pytest.approx(1 / 200) and doc["n_full"] == 448
    assert doc["power_at_full"] == pytest.approx(
        noninferiority_power_exact(448, 1 / 200, 0.02, 0.05), rel=1e-12)


def test_policy_family_and_repeats_flags(tmp_path, capsys):
    policy = tmp_path / "gate.toml"
    policy.write_text("[gate]\nalpha = 0.05\ncorrection = \"holm\"\n"
                      "[tasks.gsm8k]\nmargin = 1\n"
                      "[tasks.gpqa_diamond_cot_zeroshot]\nmargin = 5\n")
    code, out, _ = run(capsys, "plan", "--policy", str(policy), "--variants", "3",
                       "--discordance", "0.05", "--repeats", "gpqa_diamond_cot_zeroshot=4",
                       "--rho", "0.5", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["family_size"] == 6 and doc["correction"] == "holm"
    gsm, gpqa = doc["plans"]
    assert gsm["sized_alpha"] == pytest.approx(0.05 / 6) and gsm["repeats"] == 1
    assert gpqa["repeats"] == 4 and gpqa["n_full"] == 198
    assert gpqa["power_at_full"] == pytest.approx(clustered_power(198, 4, 0.5, 0.05, 0.05, 0.05))
    assert gsm["power_at_full_family"] < gsm["power_at_full"]
    code, _, err = run(capsys, "plan", "--policy", str(policy), "--margin", "1",
                       "--discordance", "0.05")
    assert code == 2 and err.startswith("v41val: error: --margin: not with --policy")
    text = run(capsys, *BASE, "--claims", "6")[1]
    assert "sized at alpha/6 = 0.008333" in text and "under holm" in text
