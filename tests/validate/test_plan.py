"""Plan files: strict one-line errors naming file and field, the hash, --ablate."""

from __future__ import annotations

import copy
import re

import pytest

from runtime.options import RuntimeOptions
from validate.errors import PlanError
from validate.plan import ablate, ablation_variants, load_plan, parse_plan

try:
    import tomllib
except ImportError:  # pragma: no cover
    import tomli as tomllib

PLAN = """\
name = "ab"
baseline = "exact"
seed = 7
concurrency = 2
warm = true

[engine]
kind = "builtin"
preset = "tiny"
device = "cpu"
dtype = "float32"

[variants.exact]
swa = "exact"

[variants.bounded]
swa = "bounded"
cut = "at"

[[tasks]]
name = "gsm8k"
limit = 10
max_gen_toks = 64

[[tasks]]
name = "gpqa_diamond_zeroshot"
items = ["rec06pnAkLOr2t2mp"]
repeats = 2

[policy]
gate = { alpha = 0.05, correction = "holm" }
tasks.gsm8k = { margin = 2.0, metric = "exact_match,flexible-extract" }
"""


def doc() -> dict:
    return tomllib.loads(PLAN)


def test_a_valid_plan_parses_into_its_parts(tmp_path):
    path = tmp_path / "ab.toml"
    path.write_text(PLAN)
    plan = load_plan(path)
    assert plan.name == "ab" and plan.baseline == "exact" and plan.seed == 7 and plan.warm
    assert plan.variant_names == ("exact", "bounded")
    assert plan.variant("bounded").runtime_options() == RuntimeOptions(swa="bounded", cut="at")
    assert [t.name for t in plan.tasks] == ["gsm8k", "gpqa_diamond_zeroshot"]
    assert plan.tasks[0].limit == 10 and plan.tasks[0].max_gen_toks == 64
    assert plan.tasks[1].items == ("rec06pnAkLOr2t2mp",) and plan.tasks[1].repeats == 2
    assert plan.policy.task("gsm8k").margin == pytest.approx(0.02)
    assert plan.to_dict()["policy"]["tasks"]["gsm8k"]["margin"] == 2.0


def test_policy_from_a_file_next_to_the_plan(tmp_path):
    (tmp_path / "gate.toml").write_text('[tasks.gsm8k]\nmargin = 3.0\nmetric = "exact_match,strict-match"\n')
    text = PLAN.split("[policy]")[0] + 'policy = "gate.toml"\n'
    text = text.replace('name = "ab"\n', 'name = "ab"\npolicy = "gate.toml"\n').rsplit("policy = ", 1)[0]
    path = tmp_path / "p.toml"
    path.write_text(text)
    plan = load_plan(path)
    assert plan.policy.task("gsm8k").margin == pytest.approx(0.03)
    assert plan.policy.source == str(tmp_path / "gate.toml")
    assert plan.policy_doc == {"tasks": {"gsm8k": {"margin": 3.0, "metric": "exact_match,strict-match"}}}


def _set(d: dict, dotted: str, value) -> dict:
    out = copy.deepcopy(d)
    node = out
    parts = dotted.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node[part]
    last = parts[-1]
    if value is _DELETE:
        del node[last]
    else:
        node[int(last) if last.isdigit() else last] = value
    return out


_DELETE = object()

BAD = [
    ("colour", "blue", r"colour: unknown key"),
    ("concurrency", "4", r"concurrency: expected an integer, got '4'"),
    ("concurrency", 0, r"concurrency: expected >= 1"),
    ("warm", 1, r"warm: expected true or false"),
    ("baseline", "fast", r"baseline: unknown variant 'fast'"),
    ("baseline", _DELETE, r"baseline: missing"),
    ("engine.kind", "tgi", r"engine.kind: expected one of builtin, openai, vllm"),
    ("engine.presett", "tiny", r"engine.presett: unknown key"),
    ("engine.device", 0, r"engine.device: expected a string"),
    ("variants.bounded.swaa", "bounded", r"variants.bounded.swaa: unknown key"),
    ("variants.bounded.swa", "fast", r"variants.bounded: RuntimeOptions.swa: expected one of"),
    ("variants.bounded.decoder_trim", "yes", r"variants.bounded.decoder_trim: expected true or false"),
    ("variants.bounded.perturb", {"noise": [1, 2]}, r"variants.bounded.perturb.noise: expected a scalar"),
    ("tasks.0.name", "gsm9k", r"tasks\[0\].name: unknown task 'gsm9k'"),
    ("tasks.0.limit", -1, r"tasks\[0\].limit: expected >= 1"),
    ("tasks.0.limitt", 3, r"tasks\[0\].limitt: unknown key"),
    ("tasks.1.items", ["a", "a"], r"tasks\[1\].items: expected a non-empty list of distinct"),
    ("tasks.0.max_gen_toks", 2.5, r"tasks\[0\].max_gen_toks: expected an integer"),
    ("policy.tasks.gpqa_main_zeroshot", {"margin": 1.0}, r"policy.tasks.gpqa_main_zeroshot: task not in the plan"),
    ("policy.gate.alpah", 0.1, r"policy: gate: unknown key 'alpah'"),
    ("policy.tasks.gsm8k.margin", "2", r"tasks.gsm8k.margin: expected a number"),
]


@pytest.mark.parametrize(("field", "value", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_plans_are_one_line_errors_naming_file_and_field(field, value, message):
    with pytest.raises(PlanError) as info:
        parse_plan(_set(doc(), field, value), "plans/ab.toml")
    text = str(info.value)
    assert text.startswith("plans/ab.toml: ") and "\n" not in text
    assert re.search(message, text), text


def test_openai_and_vllm_sections_are_checked():
    base = {"baseline": "a", "tasks": [{"name": "gsm8k"}]}
    with pytest.raises(PlanError, match=r"p.toml: engine.base_url: missing"):
        parse_plan({**base, "engine": {"kind": "openai", "model": "m"}, "variants": {"a": {}}},
                   "p.toml")
    with pytest.raises(PlanError, match=r"p.toml: variants.a.swa: unknown key"):
        parse_plan({**base, "engine": {"kind": "openai", "base_url": "http://x/v1", "model": "m"},
                    "variants": {"a": {"swa": "exact"}}}, "p.toml")
    with pytest.raises(PlanError, match=r"p.toml: variants.a.args\[1\]: expected a string"):
        parse_plan({**base, "engine": {"kind": "vllm", "model": "m"},
                    "variants": {"a": {"args": ["--x", 3]}}}, "p.toml")
    plan = parse_plan({**base, "engine": {"kind": "vllm", "model": "m", "common_args": ["--a"]},
                       "variants": {"a": {"args": ["--no-swa-bounded-replay"]}}}, "p.toml")
    assert plan.variant("a").args == ("--no-swa-bounded-replay",)


def test_cli_reports_a_bad_plan_in_one_line(tmp_path, capsys):
    from v41val.cli import main

    path = tmp_path / "bad.toml"
    path.write_text(PLAN.replace('swa = "bounded"', 'swa = "bounded"\nkernals = "all"'))
    with pytest.raises(SystemExit) as info:
        main(["run", str(path), "--workspace", str(tmp_path / "ws")])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1
    assert err.startswith(f"v41val: error: {path}: variants.bounded.kernals: unknown key")
    assert not (tmp_path / "ws").exists() or not any((tmp_path / "ws").iterdir())


def test_hash_follows_what_changes_responses_only():
    plan = parse_plan(doc(), "a.toml")
    server = _set(_set(doc(), "engine", {"kind": "openai", "base_url": "http://h/v1",
                                         "model": "m"}), "variants", {"exact": {}, "bounded": {}})
    patient = _set(_set(server, "engine.timeout_s", 900.0), "engine.max_attempts", 9)
    assert parse_plan(patient, "p.toml").hash == parse_plan(server, "s.toml").hash
    assert parse_plan(_set(server, "engine.model", "m2"), "s.toml").hash != parse_plan(
        server, "s.toml").hash
    same = [_set(doc(), "name", "renamed"), _set(doc(), "concurrency", 16),
            _set(doc(), "policy.tasks.gsm8k.margin", 9.0)]
    for d in same:
        assert parse_plan(d, "b.toml").hash == plan.hash
    different = [_set(doc(), "tasks.0.limit", 11), _set(doc(), "seed", 8),
                 _set(doc(), "variants.bounded.cut", "after"), _set(doc(), "warm", False),
                 _set(doc(), "engine.dtype", "bfloat16"), _set(doc(), "tasks.1.repeats", 3)]
    hashes = {parse_plan(d, "c.toml").hash for d in different}
    assert plan.hash not in hashes and len(hashes) == len(different)


def test_ablation_one_switch_per_variant_against_the_reference():
    plan = parse_plan(_set(doc(), "variants.exact.cut", "at"), "a.toml")
    expanded = ablate(plan, ops=())
    assert expanded.baseline == "reference"
    names = expanded.variant_names
    assert names[0] == "reference" and names[-1] == "all_on"
    opts = {v.name: v.runtime_options() for v in expanded.variants}
    ref = opts["reference"]
    assert (ref.swa, ref.encoder_replay, ref.decoder_trim, ref.kernels) == (
        "exact", False, False, "reference")
    assert (opts["encoder_replay"].encoder_replay, opts["encoder_replay"].decoder_trim) == (True, False)
    assert (opts["decoder_trim"].encoder_replay, opts["decoder_trim"].decoder_trim) == (False, True)
    assert (opts["all_on"].encoder_replay, opts["all_on"].decoder_trim) == (True, True)
    assert all(o.cut == "at" for o in opts.values())  # the baseline's cut point is kept
    # every ablated variant differs from the reference in exactly the switches it names
    for name, o in opts.items():
        changed = {k for k in ("encoder_replay", "decoder_trim", "kernels")
                   if getattr(o, k) != getattr(ref, k)}
        expected = {"reference": set(), "encoder_replay": {"encoder_replay"},
                    "decoder_trim": {"decoder_trim"}, "all_on": {"encoder_replay", "decoder_trim"}}
        assert changed == expected.get(name, {"kernels"})
    assert expanded.tasks == plan.tasks and expanded.hash != plan.hash


def test_ablation_has_one_variant_per_fused_op():
    plan = parse_plan(doc(), "a.toml")
    variants = ablation_variants(plan, ops=("gate", "mhc"))
    by_name = {v.name: v.options.to_dict() for v in variants}
    assert list(by_name) == ["reference", "encoder_replay", "decoder_trim", "fused_gate",
                             "fused_mhc", "all_on"]
    assert by_name["fused_gate"]["kernels"] == "+gate"
    assert by_name["fused_gate"]["swa"] == "exact"
    assert by_name["all_on"]["kernels"] == "all"


def test_ablation_reads_the_ops_from_the_kernel_registry():
    choice = pytest.importorskip("runtime.kernels.choice")
    from validate.plan import fused_op_names

    assert fused_op_names() == tuple(choice.OP_NAMES)
    expanded = ablate(parse_plan(doc(), "a.toml"))
    fused = [v for v in expanded.variant_names if v.startswith("fused_")]
    assert fused == [f"fused_{op}" for op in choice.OP_NAMES]  # every op, each alone
    for name in fused:  # each alone: the choice fuses exactly its op
        wanted = choice.fused_by_op(expanded.variant(name).options.kernels)
        assert [op for op, on in wanted.items() if on] == [name.removeprefix("fused_")]


def test_ablation_needs_the_builtin_engine():
    d = doc()
    d["engine"] = {"kind": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "m"}
    d["variants"] = {"exact": {}, "bounded": {"model": "b"}}
    with pytest.raises(PlanError, match=r"a.toml: engine.kind: --ablate needs the builtin engine"):
        ablate(parse_plan(d, "a.toml"))


@pytest.mark.parametrize("name", ["tiny-ab.toml", "testbed-gate.toml", "testbed-probes.toml",
                                  "flash-vllm.toml", "endpoints.toml", "cuda-graphs.toml"])
def test_shipped_example_plans_are_valid(name, repo_root):
    plan = load_plan(repo_root / "validate" / "plan" / "examples" / name)
    assert plan.baseline in plan.variant_names and plan.policy is not None
    if plan.engine.kind == "vllm":
        assert plan.variant("exact").args == ("--no-swa-bounded-replay",)
        assert plan.policy.source.endswith("gate.toml")
    if name == "cuda-graphs.toml":  # the graphs variant differs from its baseline in decode only
        a, b = (plan.variant(n).runtime_options().to_dict() for n in ("eager", "graphs"))
        assert {k for k in a if a[k] != b[k]} == {"decode"} and b["decode"] == "graphs"


def test_probe_plan_runs_each_half_of_bounded_replay_alone_and_both(repo_root):
    from tasks.testbed.probe_spec import PROBE_TASKS

    plan = load_plan(repo_root / "validate" / "plan" / "examples" / "testbed-probes.toml")
    assert plan.warm and plan.baseline == "exact"
    assert plan.variant_names == ("exact", "encoder_replay", "decoder_trim", "bounded")
    options = {name: plan.variant(name).options for name in plan.variant_names}
    assert [(o.swa, o.encoder_replay, o.decoder_trim) for o in options.values()] == [
        ("exact", False, False), ("bounded", True, False), ("bounded", False, True),
        ("bounded", True, True)]
    assert all(o.replay_tokens is None for o in options.values())  # W itself, no planted bug
    assert tuple(t.name for t in plan.tasks) == PROBE_TASKS


def test_vllm_variants_become_one_server_each(tmp_path, repo_root):
    from validate.runner.engines import VllmFactory, factory_for

    plan = load_plan(repo_root / "validate" / "plan" / "examples" / "flash-vllm.toml")
    factory = factory_for(plan, tmp_path)
    assert isinstance(factory, VllmFactory)
    exact = factory.launch_config(plan.variant("exact"))
    bounded = factory.launch_config(plan.variant("bounded"))
    port = 41234
    assert exact.server_args(port)[-4:] == ["--tensor-parallel-size", "4",
                                            "--enable-prefix-caching", "--no-swa-bounded-replay"]
    assert "--no-swa-bounded-replay" not in bounded.server_args(port)
    assert exact.model == bounded.model == "deepseek-ai/DeepSeek-V4.1-Flash"
    assert (exact.label, bounded.label) == ("exact", "bounded")
    assert exact.log_dir == str(tmp_path / "vllm-logs") and exact.startup_timeout_s == 3600.0


def test_cli_ablate_refuses_a_server_plan_in_one_line(repo_root, tmp_path, capsys):
    from v41val.cli import main

    path = repo_root / "validate" / "plan" / "examples" / "endpoints.toml"
    with pytest.raises(SystemExit) as info:
        main(["run", str(path), "--ablate", "--workspace", str(tmp_path / "ws")])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1
    assert "engine.kind: --ablate needs the builtin engine (got 'openai')" in err


def test_cuda_graphs_on_a_cpu_engine_is_refused_before_anything_runs():
    from validate.runner.engines import BuiltinFactory, check_engines

    d = doc()
    d["engine"]["device"] = "cpu"
    d["variants"]["bounded"]["decode"] = "graphs"
    with pytest.raises(PlanError, match=r"a.toml: variants.bounded: .*decode = 'graphs' needs the builtin engine "
                                        r"on a CUDA device, got device = 'cpu'"):
        plan = parse_plan(d, "a.toml")
        check_engines(plan, BuiltinFactory(plan))
