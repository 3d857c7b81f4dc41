"""``v41val run --json`` and ``v41val report --format json`` print one document: the
versioned report (reports/schema/report.schema.json), which says what each variant is
(its normalised config) and which engine ran it; ``run`` adds only ``execution``."""

from __future__ import annotations

import json

from reports.json_report import validate_document

PLAN = """\
name = "json-doc"
baseline = "exact"
fidelity_prompts = 0

[engine]
kind = "builtin"
preset = "micro"
dtype = "float32"

[variants.exact]
swa = "exact"

[variants.bounded]
swa = "bounded"

[[tasks]]
name = "gsm8k"
limit = 2
max_gen_toks = 1
"""


def _main(args, capsys) -> dict:
    from v41val.cli import main

    main(args)
    return json.loads(capsys.readouterr().out)


def test_run_json_is_the_report_document(tmp_path, capsys):
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    ws = tmp_path / "ws"
    run_doc = _main(["run", str(plan), "--workspace", str(ws), "--json"], capsys)
    report_doc = _main(["report", "latest", "--store", str(ws / "results.sqlite"),
                        "--format", "json"], capsys)
    validate_document(run_doc)
    validate_document(report_doc)
    execution = run_doc.pop("execution")
    assert execution["plan_hash"] == report_doc["run"]["plan_hash"]
    assert [v["sent"] for v in execution["variants"]] == [2, 2]
    for doc in (run_doc, report_doc):
        doc.pop("generated_at")
    assert run_doc == report_doc
    assert report_doc["schema_version"] == 3
    assert report_doc["engine"] == {"kind": "builtin", "identity": {
        "kind": "builtin", "preset": "micro", "dtype": "float32"}}
    variants = {v["variant"]: v for v in report_doc["variants"]}
    assert variants["exact"]["is_baseline"] and not variants["bounded"]["is_baseline"]
    assert variants["bounded"]["config"]["options"] == {
        "swa": "bounded", "encoder_replay": True, "decoder_trim": True, "cut": "after",
        "kernels": "reference", "batch_invariant": False, "decode": "engine",
        "decode_compile": False, "kv_storage": "dequantized", "replay_tokens": None}


def test_every_report_says_what_each_variant_is(tmp_path, capsys):
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)
    ws = tmp_path / "ws"
    _main(["run", str(plan), "--workspace", str(ws), "--json"], capsys)
    store = str(ws / "results.sqlite")
    for fmt in ("md", "terminal", "html"):
        from v41val.cli import main

        main(["report", "latest", "--store", store, "--format", fmt])
        text = capsys.readouterr().out
        assert "variant bounded" in text, fmt
        assert "swa=bounded, encoder_replay=on, decoder_trim=on" in text, fmt
        assert "baseline: swa=exact" in text and "preset=micro" in text, fmt
