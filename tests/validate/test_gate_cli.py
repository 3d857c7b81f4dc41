"""``v41val gate`` / ``compare --policy`` exit codes on constructed lm-eval sample files:
0 GO, 1 NO-GO, 3 INCONCLUSIVE, 4 INVALID, 2 malformed policy or input (one line)."""

from __future__ import annotations

import json

import pytest

from v41val.cli import main

TASK = "gsm8k_c"


def write_samples(path, outcomes, responses=None, hashes=None, task=TASK):
    """One line per doc for filter 'flexible-extract', lm-eval's field layout."""
    lines = []
    for doc_id, value in enumerate(outcomes):
        text = responses[doc_id] if responses else ("#### 7" if value else "#### 8")
        answer = "[invalid]" if "####" not in text else text.split("#### ")[-1]
        lines.append(json.dumps({
            "doc_id": doc_id, "doc": {"q": doc_id}, "target": "7",
            "arguments": {"gen_args_0": {"arg_0": f"Question {doc_id}", "arg_1": {}}},
            "resps": [[text]], "filtered_resps": [answer], "filter": "flexible-extract",
            "metrics": ["exact_match"], "doc_hash": f"d{doc_id}",
            "prompt_hash": (hashes or {}).get(doc_id, f"p{doc_id}"), "target_hash": "t",
            "exact_match": float(value),
        }))
    name = f"samples_{task}_2026-11-29T00-00-00.000001.jsonl"
    path.mkdir(parents=True, exist_ok=True)
    (path / name).write_text("\n".join(lines) + "\n")
    return path


def pair_dirs(tmp_path, n, b, c, n_b=None, **kwargs):
    """Baseline/candidate dirs with b A-only and c B-only right docs; rest right."""
    a = [1] * b + [0] * c + [1] * (n - b - c)
    bb = [0] * b + [1] * c + [1] * (n - b - c)
    bb = bb[: n_b if n_b is not None else n]
    return write_samples(tmp_path / "A", a), write_samples(tmp_path / "B", bb, **kwargs)


def policy_file(tmp_path, margin, extra=""):
    path = tmp_path / "policy.toml"
    path.write_text(f"[gate]\nalpha = 0.05\n{extra}\n[tasks.{TASK}]\nmargin = {margin}\n")
    return path


def run(capsys, *args):
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(
    "n,b,c,margin,expected_code,decision",
    [
        (1000, 10, 10, 3.0, 0, "GO"),
        (1000, 60, 0, 1.0, 1, "NO-GO"),
        (100, 3, 2, 2.0, 3, "INCONCLUSIVE"),
    ],
)
def test_gate_exit_codes(tmp_path, capsys, n, b, c, margin, expected_code, decision):
    a_dir, b_dir = pair_dirs(tmp_path, n, b, c)
    pol = policy_file(tmp_path, margin)
    code, out, err = run(capsys, "gate", str(a_dir), str(b_dir), "--policy", str(pol), "--json",
                         "--bootstrap", "500")
    assert code == expected_code, err
    doc = json.loads(out)
    assert doc["gate"]["decision"] == decision and doc["gate"]["exit_code"] == expected_code
    (row,) = doc["comparisons"]
    assert row["a"]["mean"] == pytest.approx((n - c) / n)
    assert row["b"]["mean"] == pytest.approx((n - b) / n)
    code2, _, _ = run(capsys, "compare", str(a_dir), str(b_dir), "--policy", str(pol),
                      "--bootstrap", "500")
    assert code2 == expected_code


def test_gate_invalid_on_missing_items_and_on_invalid_answers(tmp_path, capsys):
    a_dir, b_dir = pair_dirs(tmp_path / "cov", 1000, 10, 10, n_b=990)
    pol = policy_file(tmp_path, 3.0)
    code, out, _ = run(capsys, "gate", str(a_dir), str(b_dir), "--policy", str(pol), "--json",
                       "--bootstrap", "500")
    assert code == 4
    task = json.loads(out)["gate"]["tasks"][0]
    assert task["verdict"] == "INVALID" and "coverage 99.00 %" in task["reasons"][0]
    # candidate stops writing '#### n': 5 % of answers become [invalid]
    responses = ["#### 7"] * 1000
    for i in range(100, 150):
        responses[i] = "the answer is 7"
    a_dir, b_dir = pair_dirs(tmp_path / "inv", 1000, 0, 0, responses=responses)
    code, out, _ = run(capsys, "gate", str(a_dir), str(b_dir), "--policy", str(pol), "--json",
                       "--bootstrap", "500")
    assert code == 4
    assert "invalid-answer rate 5.00 %" in json.loads(out)["gate"]["tasks"][0]["reasons"][0]


def test_prove_safe_turns_inconclusive_into_no_go(tmp_path, capsys):
    a_dir, b_dir = pair_dirs(tmp_path, 100, 3, 2)
    pol = policy_file(tmp_path, 2.0, extra='mode = "prove-safe"')
    code, out, _ = run(capsys, "gate", str(a_dir), str(b_dir), "--policy", str(pol), "--json",
                       "--bootstrap", "500")
    assert code == 1 and json.loads(out)["gate"]["decision"] == "NO-GO"


def test_malformed_policy_is_exit_2_one_line(tmp_path, capsys):
    a_dir, b_dir = pair_dirs(tmp_path, 100, 3, 2)
    bad = tmp_path / "bad.toml"
    bad.write_text(f"[tasks.{TASK}]\nmargin = \"big\"\n")
    code, out, err = run(capsys, "gate", str(a_dir), str(b_dir), "--policy", str(bad))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("v41val: error:")
    assert str(bad) in err and f"tasks.{TASK}.margin" in err


def test_policy_metric_must_exist(tmp_path, capsys):
    a_dir, b_dir = pair_dirs(tmp_path, 100, 3, 2)
    pol = tmp_path / "p.toml"
    pol.write_text(f"[tasks.{TASK}]\nmargin = 1\nmetric = \"exact_match,strict-match\"\n")
    code, _, err = run(capsys, "gate", str(a_dir), str(b_dir), "--policy", str(pol))
    assert code == 2 and "exact_match,flexible-extract" in err and err.count("\n") == 1
