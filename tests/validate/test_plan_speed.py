"""The plan's optional [speed] table: defaults, every field checked with a one-line
error naming file and field, kept out of the plan hash."""

from __future__ import annotations

import re

import pytest

from validate.errors import PlanError
from validate.plan import parse_plan
from validate.plan.speed import SpeedSpec


def doc(speed=None, kind: str = "builtin") -> dict:
    engine = {"kind": kind, "preset": "micro"} if kind == "builtin" else {
        "kind": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "m"}
    d = {"name": "s", "baseline": "a", "engine": engine, "variants": {"a": {}, "b": {}},
         "tasks": [{"name": "gsm8k", "limit": 1}]}
    if speed is not None:
        d["speed"] = speed
    return d


def test_absent_table_means_no_sweep():
    plan = parse_plan(doc(), "p.toml")
    assert plan.speed is None and plan.to_dict()["speed"] is None


def test_empty_table_takes_the_documented_defaults():
    spec = parse_plan(doc({}), "p.toml").speed
    assert spec == SpeedSpec(sweep_levels=(1, 2, 4, 8), target_tokens_per_s=150.0,
                             user_quantile=0.1, prompt_tokens=256, max_tokens=32,
                             requests_per_level=16, ignore_eos=True)


def test_plan_defaults_are_the_sweep_defaults():
    from validate.speed import sweep

    assert SpeedSpec().target_tokens_per_s == sweep.DEFAULT_TARGET
    assert SpeedSpec().user_quantile == sweep.DEFAULT_USER_QUANTILE


def test_given_fields_are_kept_and_stored_with_the_plan():
    plan = parse_plan(doc({"sweep_levels": [1, 3], "target_tokens_per_s": 20,
                           "user_quantile": 0.5, "prompt_tokens": 8, "max_tokens": 4,
                           "requests_per_level": 3, "ignore_eos": False}), "p.toml")
    assert plan.speed == SpeedSpec((1, 3), 20.0, 0.5, 8, 4, 3, False)
    assert isinstance(plan.speed.target_tokens_per_s, float)
    assert plan.to_dict()["speed"] == {"sweep_levels": [1, 3], "target_tokens_per_s": 20.0,
                                       "user_quantile": 0.5, "prompt_tokens": 8,
                                       "max_tokens": 4, "requests_per_level": 3,
                                       "ignore_eos": False}


def test_sweep_settings_do_not_change_the_plan_hash():
    # a sweep never changes a quality response, so adding one must resume the responses
    assert parse_plan(doc(), "p.toml").hash == parse_plan(doc({"max_tokens": 9}), "p.toml").hash


BAD = [
    ({"levels": [1]}, r"speed.levels: unknown key"),
    ({"sweep_levels": "1,2"}, r"speed.sweep_levels: expected an array"),
    ({"sweep_levels": []}, r"speed.sweep_levels: expected strictly increasing integers "
                           r">= 1 \(or \[\] with speed.rounds > 0: rounds alone\), got \[\]"),
    ({"sweep_levels": [], "rounds": 0}, r"speed.sweep_levels: .*rounds alone"),
    ({"sweep_levels": [1, 4, 2]}, r"speed.sweep_levels: expected strictly increasing"),
    ({"sweep_levels": [1, 2, 2]}, r"speed.sweep_levels: expected strictly increasing"),
    ({"sweep_levels": [0, 1]}, r"speed.sweep_levels: expected strictly increasing integers >= 1"),
    ({"sweep_levels": [2, 4]}, r"speed.sweep_levels: must start at 1"),
    ({"sweep_levels": [1, 2.5]}, r"speed.sweep_levels\[1\]: expected an integer"),
    ({"sweep_levels": [1, True]}, r"speed.sweep_levels\[1\]: expected an integer"),
    ({"target_tokens_per_s": 0}, r"speed.target_tokens_per_s: expected > 0, got 0"),
    ({"target_tokens_per_s": "fast"}, r"speed.target_tokens_per_s: expected a number"),
    ({"user_quantile": 1.5}, r"speed.user_quantile: expected a number in \[0, 1\]"),
    ({"user_quantile": -0.1}, r"speed.user_quantile: expected a number in \[0, 1\]"),
    ({"prompt_tokens": 0}, r"speed.prompt_tokens: expected >= 1, got 0"),
    ({"max_tokens": 1}, r"speed.max_tokens: expected >= 2, got 1"),
    ({"max_tokens": 3.0}, r"speed.max_tokens: expected an integer"),
    ({"requests_per_level": 0}, r"speed.requests_per_level: expected >= 1"),
    ({"ignore_eos": "yes"}, r"speed.ignore_eos: expected true or false, got 'yes'"),
    ({"sweep_levels": [1, 8], "requests_per_level": 4},
     r"speed.requests_per_level: expected >= the highest sweep level \(8\), got 4"),
]


@pytest.mark.parametrize(("speed", "message"), BAD, ids=[str(b[0]) for b in BAD])
def test_bad_speed_fields_are_one_line_errors(speed, message):
    with pytest.raises(PlanError) as info:
        parse_plan(doc(speed), "plans/s.toml")
    text = str(info.value)
    assert text.startswith("plans/s.toml: speed") and "\n" not in text
    assert re.search(message, text), text


def test_speed_must_be_a_table():
    with pytest.raises(PlanError, match=r"^p.toml: speed: expected a table, got 3$"):
        parse_plan(doc(3), "p.toml")


def test_server_engines_take_the_sweep_too():
    # openai: the variant's endpoint; vllm: the variant's server (tests/validate/test_runner_headline_http.py)
    assert parse_plan(doc({"ignore_eos": False}, kind="openai"), "p.toml").speed.ignore_eos is False


def test_the_sweep_needs_streamed_replies():
    d = doc({}, kind="openai")
    d["engine"]["stream"] = False
    with pytest.raises(PlanError, match=r"^p.toml: speed: the concurrency sweep needs streamed replies"):
        parse_plan(d, "p.toml")


def test_rounds_alone_parse():
    """``sweep_levels = []`` is the rounds alone: accepted with rounds > 0, and any
    requests_per_level >= 1 will do (no sweep level to hold)."""
    plan = parse_plan(doc({"sweep_levels": [], "rounds": 3, "requests_per_level": 2}))
    assert plan.speed.sweep_levels == () and plan.speed.rounds == 3
    assert plan.to_dict()["speed"]["sweep_levels"] == []
