"""The gate's engagement check: the policy field, its strict parsing, and the rule
(engaged share >= min_fraction, unknown never counting as engaged)."""

from __future__ import annotations

import pytest

from validate.errors import PolicyError
from validate.gate.engagement import EngagementCount, EngagementPolicy, engagement_failures
from validate.gate.policy import parse_policy

TASKS = {"tasks": {"t": {"margin": 1.0}}}


def test_policy_field_is_optional_and_checked():
    assert parse_policy(TASKS).engagement == EngagementPolicy(None)
    doc = {**TASKS, "engagement": {"min_fraction": 0.9}}
    assert parse_policy(doc, "p.toml").engagement.min_fraction == 0.9
    for bad, said in ((0, "engagement.min_fraction: expected a number in (0.0, 1.0]"),
                      (1.5, "engagement.min_fraction: expected a number in (0.0, 1.0]"),
                      ("all", "engagement.min_fraction: expected a number")):
        with pytest.raises(PolicyError) as err:
            parse_policy({**TASKS, "engagement": {"min_fraction": bad}}, "p.toml")
        assert said in str(err.value) and str(err.value).startswith("p.toml: ")
    with pytest.raises(PolicyError, match="engagement: unknown key 'min_share'"):
        parse_policy({**TASKS, "engagement": {"min_share": 0.5}}, "p.toml")


def test_the_rule_counts_unknown_as_not_engaged():
    policy = EngagementPolicy(min_fraction=0.9)
    ok = EngagementCount("encoder_replay", engaged=9, known=10, n=10)
    assert engagement_failures((ok,), policy) == ()
    unknown = EngagementCount("encoder_replay", engaged=5, known=5, n=10)
    [reason] = engagement_failures((unknown,), policy)
    assert reason.startswith("did not engage: encoder_replay engaged on 5 of 10 items "
                             "(5 known, 5 unknown) = 50.0 % < 90.0 %")
    assert engagement_failures((unknown,), EngagementPolicy()) == ()  # not checked
    empty = EngagementCount("decoder_trim", engaged=0, known=0, n=0)
    assert len(engagement_failures((empty,), policy)) == 1  # no rows: not shown engaged
