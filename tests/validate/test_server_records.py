"""A server variant's record is the server's own word: ``/version`` and ``/v1/models``
from a stand-in server (fake_openai_server.py) for a vLLM, another server, a server
without ``/version`` and one that does not answer; through the runner, the record is
stored per variant and the run identity's ``vllm`` is the server's version."""

from __future__ import annotations

import pytest

from validate.engines.openai import OpenAIEngine
from validate.engines.openai_config import OpenAIEngineConfig
from validate.engines.server_info import root_url, served_vllm_version, server_report
from validate.engines.server_process import free_loopback_port
from validate.engines.vllm_config import LOOPBACK
from validate.plan import load_plan
from validate.runner import run_plan
from validate.store import ResultsStore

TASK, LIMIT = "gsm8k_cot_zeroshot", 2
MODEL = {"id": "fake-model", "owned_by": "vllm", "root": "/models/fake", "parent": None,
         "max_model_len": 4096}


def _engine(base_url: str) -> OpenAIEngine:
    return OpenAIEngine(OpenAIEngineConfig(base_url=base_url, model="fake-model",
                                           connect_timeout_s=2.0))


def test_a_vllm_server_reports_its_version_and_effective_settings(fake_openai):
    fake_openai.state.reset()
    meta = _engine(fake_openai.base_url).server_metadata()
    assert meta["server"] == {"version": "0.32.0+fake", "owned_by": "vllm",
                              "models": [MODEL], "unanswered": []}
    assert served_vllm_version(meta) == "0.32.0+fake"


def test_another_server_is_no_vllm_and_a_missing_route_is_named(fake_openai):
    fake_openai.state.reset()
    fake_openai.state.owned_by, fake_openai.state.version = "v41val", None
    meta = _engine(fake_openai.base_url).server_metadata()
    assert meta["server"]["owned_by"] == "v41val" and meta["server"]["version"] is None
    [missing] = meta["server"]["unanswered"]
    assert missing.startswith(f"{fake_openai.root}/version: ") and "404" in missing
    assert served_vllm_version(meta) is None
    # a launched vLLM without /version: its environment's probed version
    assert served_vllm_version({"engine": "vllm", "vllm_version": "0.32.0",
                                "server": meta["server"]}) == "0.32.0"
    fake_openai.state.reset()


def test_a_server_that_does_not_answer_is_unknown_not_guessed():
    base = f"http://{LOOPBACK}:{free_loopback_port()}/v1"
    report = server_report(base, timeout_s=1.0)
    assert (report.version, report.models, report.owner) == (None, (), None)
    assert [u.split(": ")[0] for u in report.unanswered] == [f"{root_url(base)}/version",
                                                              f"{base}/models"]
    assert root_url("http://h:1/v1/") == "http://h:1" and root_url("http://h:1") == "http://h:1"


@pytest.mark.parametrize("owned_by, identity", [("vllm", "0.32.0+fake"), ("sglang", None)])
def test_the_runner_stores_each_variants_server_and_the_served_vllm(tmp_path, fake_openai,
                                                                    owned_by, identity):
    fake_openai.state.reset()
    fake_openai.state.owned_by = owned_by
    path = tmp_path / "plan.toml"
    path.write_text(f"""
name = "server-records"
baseline = "a"
[engine]
kind = "openai"
base_url = "{fake_openai.base_url}"
model = "fake-model"
stream = false
[variants.a]
[variants.b]
[[tasks]]
name = "{TASK}"
limit = {LIMIT}
max_gen_toks = 4
""")
    plan = load_plan(path)
    with ResultsStore.open(tmp_path / "r.sqlite") as store:
        outcome = run_plan(plan, store)
        for variant in ("a", "b"):
            [record] = store.servers(plan.hash, variant)
            assert record["server"]["models"] == [{**MODEL, "owned_by": owned_by}]
            assert record["base_url"] == fake_openai.base_url
        [run] = store.runs(plan.hash)
        assert run.run_id == outcome.run.run_id and run.identity["vllm"] == identity
    fake_openai.state.reset()


def test_the_store_keeps_server_records_per_run_and_amends_only_the_identity_fields(tmp_path):
    from validate.store.owner import OWNER_KEY

    path = tmp_path / "r.sqlite"
    with ResultsStore.open(path) as store:
        first = store.begin_run("h" * 64, identity={"git": None, "vllm": None})
        second = store.begin_run("h" * 64, identity={"git": None, "vllm": None})
        store.put_server(second, "a", {"server": {"version": "2"}})
        store.put_server(first, "a", {"server": {"version": "1"}})
        store.put_server(first, "a", {"server": {"version": "1b"}})  # a rerun replaces
        store.amend_identity(first, {"vllm": "1b"})
        assert [r["server"]["version"] for r in store.servers("h" * 64, "a")] == ["1b", "2"]
        assert store.servers("h" * 64, "b") == []
        runs = {r.run_id: r for r in store.runs("h" * 64)}
    assert runs[first.run_id].identity["vllm"] == "1b"
    assert runs[second.run_id].identity["vllm"] is None
    # the run's owner (pid, host, start) lives in the same JSON and survives the amendment
    assert runs[first.run_id].owner == first.owner is not None
    assert OWNER_KEY not in runs[first.run_id].identity
    with ResultsStore.open(path, read_only=True) as store:
        assert len(store.servers("h" * 64, "a")) == 2
