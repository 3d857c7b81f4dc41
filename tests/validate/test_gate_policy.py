"""Policy files: a full valid policy, and one-line errors naming the file and the field."""

from __future__ import annotations

import pytest

from validate.errors import PolicyError
from validate.gate import load_policy

VALID = """
[gate]
alpha = 0.025
power = 0.9
correction = "bonferroni"
mode = "prove-safe"
equivalence = true

[health]
min_coverage = 0.99
max_length_ratio = 2.0

[tasks.gsm8k_local]
margin = 1.5
tier = "critical"
metric = "exact_match,flexible-extract"

[tasks.gpqa_diamond]
margin = 5
tier = "advisory"
"""


def write(tmp_path, text, name="policy.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_valid_policy(tmp_path):
    pol = load_policy(write(tmp_path, VALID))
    assert (pol.alpha, pol.power, pol.correction, pol.mode, pol.equivalence) == (
        0.025, 0.9, "bonferroni", "prove-safe", True)
    assert pol.health.min_coverage == 0.99 and pol.health.max_length_ratio == 2.0
    assert pol.health.max_invalid_rate_increase == 0.02  # default kept
    gsm, gpqa = pol.tasks
    assert gsm.task == "gsm8k_local" and gsm.margin == pytest.approx(0.015)
    assert gsm.metric == "exact_match,flexible-extract" and gsm.tier == "critical"
    assert gpqa.margin == pytest.approx(0.05) and gpqa.tier == "advisory" and gpqa.metric is None


@pytest.mark.parametrize(
    "text,needle",
    [
        ("[gate]\nalpha = 0.05\n[tasks.a]\nmargni = 1\n", "tasks.a: unknown key 'margni'"),
        ("[tasks.a]\nmargin = 'one'\n", "tasks.a.margin: expected a number"),
        ("[tasks.a]\nmargin = -1\n", "tasks.a.margin: expected a number in (0.0, 50.0]"),
        ("[tasks.a]\ntier = 'critical'\n", "tasks.a.margin: missing"),
        ("[tasks.a]\nmargin = 1\ntier = 'blocker'\n", "tasks.a.tier: expected one of"),
        ("[gate]\ncorrection = 'bh'\n[tasks.a]\nmargin = 1\n", "gate.correction: expected one of"),
        ("[gate]\nmode = 'strict'\n[tasks.a]\nmargin = 1\n", "gate.mode: expected one of"),
        ("[gate]\nalpha = 0.7\n[tasks.a]\nmargin = 1\n", "gate.alpha"),
        ("[gate]\nequivalence = 'yes'\n[tasks.a]\nmargin = 1\n", "gate.equivalence"),
        ("[health]\nmin_coverage = 2\n[tasks.a]\nmargin = 1\n", "health.min_coverage"),
        ("[health]\nmax_flakes = 2\n[tasks.a]\nmargin = 1\n", "health: unknown key 'max_flakes'"),
        ("[gate]\nalpha = 0.05\n", "tasks: expected at least one"),
        ("[gate\nalpha = 0.05\n", "not valid TOML"),
        ("[tasks.a]\nmargin = 1\n[extra]\nx = 1\n", "unknown key 'extra'"),
    ],
)
def test_malformed_policy_names_file_and_field(tmp_path, text, needle):
    path = write(tmp_path, text)
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    message = str(info.value)
    assert str(path) in message and needle in message, message
    assert "\n" not in message


def test_missing_policy_file(tmp_path):
    with pytest.raises(PolicyError, match="cannot read policy file"):
        load_policy(tmp_path / "nope.toml")
