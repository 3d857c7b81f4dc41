"""One source of truth per switch: a boolean switch added to ``RuntimeOptions`` here, in
the test, with no other edit, is accepted by a plan, by ``serve``'s flags, by the
lm-eval model's arguments, by ``--ablate`` and in the variant's stored config and the
report document."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import typer
from typer.testing import CliRunner

from runtime.options import Ablation, RuntimeOptions, switch, switches
from validate.errors import PlanError
from validate.plan import ablate, parse_plan


@dataclass(frozen=True)
class WithFastExp(RuntimeOptions):
    """RuntimeOptions with one more switch, as a contributor would add it."""

    fast_exp: bool = switch(False, kind=bool, help="Use the fast exp approximation.",
                            ablation=Ablation(off=False, on=True))


def plan_doc(**variant) -> dict:
    return {"name": "sw", "baseline": "base",
            "engine": {"kind": "builtin", "preset": "micro"},
            "variants": {"base": {}, "fast": {"fast_exp": True, **variant}},
            "tasks": [{"name": "gsm8k", "limit": 2}]}


def test_the_switch_is_described_once():
    assert list(switches(WithFastExp))[-1] == "fast_exp"
    assert switches(WithFastExp)["fast_exp"].cli_flag("fast_exp") == "--fast-exp"


def test_a_plan_accepts_it_and_stores_it_normalised():
    plan = parse_plan(plan_doc(), "p.toml", options_type=WithFastExp)
    assert plan.variant("fast").options.fast_exp is True
    assert plan.variant("base").options.fast_exp is False
    assert plan.identity()["variants"]["fast"]["options"]["fast_exp"] is True
    assert plan.to_dict()["variants"]["base"]["options"]["fast_exp"] is False
    with pytest.raises(PlanError, match=r"p.toml: variants.fast.fast_exp: expected true or false"):
        parse_plan(plan_doc(fast_exp="yes"), "p.toml", options_type=WithFastExp)
    with pytest.raises(PlanError, match=r"variants.fast.fast_exp: unknown key"):
        parse_plan(plan_doc(), "p.toml")  # the stock options do not have it


def test_ablate_varies_it_alone_and_in_all_on():
    plan = ablate(parse_plan(plan_doc(), "p.toml", options_type=WithFastExp))
    assert "fast_exp" in plan.variant_names
    alone = plan.variant("fast_exp").options
    assert alone == WithFastExp(swa="exact", encoder_replay=False, decoder_trim=False,
                                fast_exp=True)
    assert plan.variant("reference").options.fast_exp is False
    assert plan.variant("all_on").options.fast_exp is True
    assert plan.identity()["variants"]["fast_exp"]["options"]["fast_exp"] is True


def test_serve_takes_it_as_a_flag():
    from v41val.cli.serve_cmd import serve_command

    app = typer.Typer()
    app.command("serve")(serve_command(WithFastExp))
    app.command("other")(lambda: None)  # keep "serve" a subcommand
    result = CliRunner().invoke(app, ["serve", "--preset", "micro", "--fast-exp", "--check",
                                      "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["options"]["fast_exp"] is True
    result = CliRunner().invoke(app, ["serve", "--help"])
    assert "--fast-exp" in result.output and "--no-fast-exp" in result.output


def test_the_lm_eval_model_takes_it_as_a_model_arg():
    lmeval_model = pytest.importorskip("validate.lmeval_model")

    class Model(lmeval_model.V41ValLM):
        options_type = WithFastExp

    lm = Model.create_from_arg_string("preset=micro,fast_exp=true,swa=bounded")
    assert lm.options == WithFastExp(swa="bounded", fast_exp=True)


def test_the_report_shows_it_in_the_variant_config(tmp_path):
    from reports.document import report_document
    from reports.json_report import validate_document
    from validate.analysis import analyze_run
    from validate.runner import run_plan
    from validate.store import ResultsStore

    d = plan_doc()
    d["fidelity_prompts"] = 0
    d["tasks"] = [{"name": "gsm8k", "limit": 1, "max_gen_toks": 1}]
    plan = parse_plan(d, "p.toml", options_type=WithFastExp)
    with ResultsStore.open(tmp_path / "results.sqlite") as store:
        run_plan(plan, store)
        doc = report_document(analyze_run(store))
    validate_document(doc)
    configs = {v["variant"]: v["config"]["options"] for v in doc["variants"]}
    assert configs["fast"]["fast_exp"] is True and configs["base"]["fast_exp"] is False
    assert configs["fast"] == WithFastExp(fast_exp=True).to_dict()
