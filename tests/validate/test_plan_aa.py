"""``aa = true`` in a plan: the baseline's A/A copy, its identity and its input errors."""

from __future__ import annotations

import pytest

from validate.errors import PlanError
from validate.plan.load import parse_plan


def _doc(**extra):
    return {"name": "p", "baseline": "a", "engine": {"kind": "builtin", "preset": "micro"},
            "variants": {"a": {"swa": "exact"}, "b": {"swa": "bounded"}},
            "tasks": [{"name": "gsm8k", "limit": 2}], **extra}


def test_the_copy_has_the_baselines_configuration_and_its_own_name():
    plan = parse_plan(_doc(aa=True))
    copy = plan.variant("a+aa")
    assert plan.aa_variant == "a+aa" and copy.options == plan.variant("a").options
    assert copy.config() == {**plan.variant("a").config(), "aa_of": "a"}
    assert parse_plan(_doc()).aa_variant is None
    assert parse_plan(_doc()).hash != plan.hash  # a new variant: a new plan


@pytest.mark.parametrize("extra, said", [
    ({"aa": "yes"}, "aa: expected true or false"),
    ({"aa": True, "variants": {"a": {}, "a+aa": {}}}, "a variant is already named 'a+aa'"),
])
def test_bad_aa_settings_are_one_line_errors(extra, said):
    with pytest.raises(PlanError) as err:
        parse_plan(_doc(**extra), "plan.toml")
    assert said in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith("plan.toml: ")
