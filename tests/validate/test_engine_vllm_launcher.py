"""The vllm launcher without a real vLLM: config validation, the exact command lines,
the refusal when vLLM is missing, and a full start/stop through a stand-in environment.

The stand-in is a real interpreter wrapped by a shell script that puts a fake ``vllm``
package (and its distribution metadata) on PYTHONPATH: the launcher probes it, picks a
launcher, runs ``python -m vllm.entrypoints.openai.api_server``, waits for /health and
stops it, exactly as with the real thing. The fake server records the argv and
environment it got, which is what these tests check. The real vLLM is in
test_engine_vllm_real.py.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tasks.request import GenerationParams, Request
from validate.engines.base import EngineFailure, iterate_blocking
from validate.engines.server_process import ServerExitedEarly
from validate.engines.vllm import VllmEngine, VllmNotInstalled, VllmServer, resolve_launch
from validate.engines.vllm_config import (
    DEFAULT_ENV,
    VllmConfigError,
    VllmLaunchConfig,
    launch_config_from_mapping,
)

FAKE_API_SERVER = textwrap.dedent("""
    import argparse, http.server, json, os, sys
    parser = argparse.ArgumentParser(prog="api_server.py")
    for flag in ("--model", "--host", "--max-model-len", "--served-model-name"):
        parser.add_argument(flag)
    parser.add_argument("--port", type=int)
    parser.add_argument("--enforce-eager", action="store_true")
    parser.add_argument("--no-swa-bounded-replay", action="store_true")
    parser.add_argument("--swa-bounded-replay", action="store_true")
    parser.add_argument("--enable-prompt-tokens-details", action="store_true")
    args = parser.parse_args()  # an unknown flag exits 2 with "error: unrecognized ..."
    keys = ("HF_HUB_OFFLINE", "VLLM_NO_USAGE_STATS", "DO_NOT_TRACK", "VLLM_HOST_IP",
            "TORCHDYNAMO_DISABLE", "EXTRA_SETTING")
    with open(os.environ["FAKE_VLLM_RECORD"], "w") as fh:
        json.dump({"argv": sys.argv[1:], "module": __name__ == "__main__" and __spec__.name,
                   "env": {k: os.environ.get(k) for k in keys}}, fh)
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()
        def log_message(self, *args):
            pass
    if os.environ.get("FAKE_VLLM_SAY"):
        print(os.environ["FAKE_VLLM_SAY"], flush=True)
    print("fake vllm ready", flush=True)
    http.server.HTTPServer((args.host, args.port), Health).serve_forever()
""")


def make_fake_env(root: Path, distribution: str, with_script: bool) -> Path:
    """A directory with bin/python (a wrapper of this interpreter) that can import a fake
    vllm whose installed distribution is ``distribution``; returns bin/python."""
    site = root / "site"
    package = site / "vllm" / "entrypoints" / "openai"
    package.mkdir(parents=True)
    for folder in (site / "vllm", site / "vllm" / "entrypoints", package):
        (folder / "__init__.py").write_text("")
    (package / "api_server.py").write_text(FAKE_API_SERVER)
    dist_info = site / f"{distribution.replace('-', '_')}-0.32.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.32.0\n")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    if with_script:
        script = bin_dir / "vllm"
        script.write_text("#!/bin/sh\nexit 0\n")  # only its presence matters here
        script.chmod(0o755)
    return python


def _config(**overrides) -> VllmLaunchConfig:
    settings = dict(model="/models/tiny", common_args=("--max-model-len", "512"),
                    variant_args=("--no-swa-bounded-replay",))
    settings.update(overrides)
    return VllmLaunchConfig(**settings)


# --- configuration -----------------------------------------------------------------

@pytest.mark.parametrize("field, value, message", [
    ("common_args", ("--port", "9000"), "common_args must not set --port"),
    ("variant_args", ("--host=0.0.0.0",), "variant_args must not set --host"),
    ("variant_args", ("--model", "other"), "variant_args must not set --model"),
    ("variant_args", "--no-swa-bounded-replay", "variant_args must be a list of strings"),
    ("common_args", ("--max-model-len", 512), "common_args must be a list of strings"),
    ("launcher", "docker", "launcher must be one of auto, cli, module, got 'docker'"),
    ("port", 70000, "port must be in 1..65535, got 70000"),
    ("startup_timeout_s", 0, "startup_timeout_s must be > 0"),
    ("label", "../x", "label '../x' must be a plain file-name part"),
    ("model", " ", "model must be a non-empty path or model id"),
])
def test_malformed_launch_settings_are_refused_naming_the_field(field, value, message):
    with pytest.raises(VllmConfigError) as err:
        _config(**{field: value})
    assert message in str(err.value) and "\n" not in str(err.value)
    assert isinstance(err.value, ValueError)


def test_lists_become_tuples_so_configs_from_toml_and_code_compare_equal():
    config = _config(common_args=["--enforce-eager"], variant_args=["--x", "1"])
    assert config.common_args == ("--enforce-eager",) and config.variant_args == ("--x", "1")
    assert config == _config(common_args=("--enforce-eager",), variant_args=("--x", "1"))


def test_module_and_cli_command_lines_put_variant_flags_last():
    config = _config(served_model_name="tiny")
    assert config.argv("module", "/venv/bin/python", None, 8123) == (
        "/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model",
        "/models/tiny", "--host", "127.0.0.1", "--port", "8123", "--served-model-name",
        "tiny", "--enable-prompt-tokens-details", "--max-model-len", "512",
        "--no-swa-bounded-replay")
    assert _config().argv("cli", "/venv/bin/python", "/venv/bin/vllm", 8123) == (
        "/venv/bin/vllm", "serve", "/models/tiny", "--host", "127.0.0.1", "--port", "8123",
        "--enable-prompt-tokens-details", "--max-model-len", "512", "--no-swa-bounded-replay")
    assert config.request_model_name == "tiny" and _config().request_model_name == "/models/tiny"


def test_environment_defaults_overrides_and_removals():
    offline = {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
               "VLLM_HOST_IP": "127.0.0.1"}
    env = _config(env={"TORCHDYNAMO_DISABLE": None, "EXTRA_SETTING": "7"})
    assert env.environment(cpu_build=True) == {**offline, "TORCHDYNAMO_DISABLE": None,
                                               "EXTRA_SETTING": "7"}
    assert _config().environment(cpu_build=False) == offline == dict(DEFAULT_ENV)
    assert _config().environment(cpu_build=True) == {**offline, "TORCHDYNAMO_DISABLE": "1"}


def test_unknown_client_setting_is_refused():
    with pytest.raises(VllmConfigError, match="unknown client setting.s. base_url, turbo"):
        VllmEngine(_config(), client={"turbo": True, "base_url": "http://x"})


# --- refusal when vLLM is missing ----------------------------------------------------

def test_python_without_vllm_is_refused_in_one_line():
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("this interpreter has vllm installed")
    with pytest.raises(VllmNotInstalled) as err:
        VllmServer(_config(python=sys.executable, launcher="module")).start()
    message = str(err.value)
    assert message.startswith(f"vllm engine: vLLM is not installed for {sys.executable}")
    assert "\n" not in message and isinstance(err.value, OSError)


def test_missing_python_is_refused(tmp_path):
    missing = str(tmp_path / "venv" / "bin" / "python")
    with pytest.raises(VllmNotInstalled, match="python .*venv/bin/python' does not exist"):
        resolve_launch(_config(python=missing))


def test_cli_launcher_needs_a_vllm_script(tmp_path):
    python = make_fake_env(tmp_path, "vllm-cpu", with_script=False)
    with pytest.raises(VllmNotInstalled, match="no `vllm` script next to"):
        resolve_launch(_config(python=str(python), launcher="cli"))


# --- auto launcher choice ----------------------------------------------------------------

def test_auto_picks_module_for_vllm_cpu_even_with_a_script(tmp_path):
    python = make_fake_env(tmp_path, "vllm-cpu", with_script=True)
    resolved = resolve_launch(_config(python=str(python)))
    assert (resolved.launcher, resolved.vllm_script) == ("module", None)
    assert (resolved.distribution, resolved.version) == ("vllm-cpu", "0.32.0")


def test_auto_picks_the_cli_for_the_vllm_distribution(tmp_path):
    python = make_fake_env(tmp_path, "vllm", with_script=True)
    resolved = resolve_launch(_config(python=str(python)))
    assert resolved.launcher == "cli" and resolved.vllm_script == str(tmp_path / "bin" / "vllm")
    assert resolved.distribution == "vllm"


# --- full launch through the stand-in ------------------------------------------------

def _session_alive(sid: int) -> list[str]:
    out = subprocess.run(["ps", "-s", str(sid), "-o", "stat="], capture_output=True,
                         text=True).stdout.split()
    return [s for s in out if not s.startswith("Z")]


def test_server_gets_loopback_port_flags_and_environment_then_stops(tmp_path, monkeypatch):
    python = make_fake_env(tmp_path, "vllm-cpu", with_script=False)
    record = tmp_path / "record.json"
    config = _config(python=str(python), log_dir=str(tmp_path / "logs"), label="replay-off",
                     env={"FAKE_VLLM_RECORD": str(record), "TORCHDYNAMO_DISABLE": None,
                          "EXTRA_SETTING": "7"})
    monkeypatch.setenv("TORCHDYNAMO_DISABLE", "1")  # inherited unless the config removes it
    with VllmServer(config) as server:
        assert server.running
        seen = json.loads(record.read_text())
        sid = server.pid
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    assert seen["module"] == "vllm.entrypoints.openai.api_server"
    assert seen["argv"] == ["--model", "/models/tiny", "--host", "127.0.0.1", "--port",
                            str(server.port), "--enable-prompt-tokens-details",
                            "--max-model-len", "512", "--no-swa-bounded-replay"]
    assert seen["env"] == {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
                           "DO_NOT_TRACK": "1", "VLLM_HOST_IP": "127.0.0.1",
                           "TORCHDYNAMO_DISABLE": None, "EXTRA_SETTING": "7"}
    assert _session_alive(sid) == [] and not server.running
    assert server.log_path.parent == tmp_path / "logs"
    assert server.log_path.name.startswith("replay-off-")
    assert "fake vllm ready" in server.log_path.read_text()
    meta = server.metadata()
    assert meta["launcher"] == "module" and meta["vllm_version"] == "0.32.0"
    assert meta["variant_args"] == ["--no-swa-bounded-replay"] and meta["startup_s"] > 0
    assert meta["env"]["TORCHDYNAMO_DISABLE"] is None and meta["env"]["EXTRA_SETTING"] == "7"


def test_what_the_server_says_about_bounded_replay_is_in_the_metadata(tmp_path):
    python = make_fake_env(tmp_path, "vllm", with_script=False)
    said = "WARNING [model.py:1] Decoder SWA bounded replay is off: sequence parallelism"
    config = _config(python=str(python), launcher="module", log_dir=str(tmp_path),
                     variant_args=("--swa-bounded-replay",),
                     env={"FAKE_VLLM_RECORD": str(tmp_path / "r"), "FAKE_VLLM_SAY": said})
    with VllmServer(config) as server:
        pass
    # the launch line (which names --swa-bounded-replay) is not the server speaking
    assert server.metadata()["replay_log_lines"] == [said]


def test_cpu_only_settings_stay_off_for_the_gpu_distribution(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHDYNAMO_DISABLE", raising=False)
    python = make_fake_env(tmp_path, "vllm", with_script=False)
    record = tmp_path / "record.json"
    config = _config(python=str(python), launcher="module", log_dir=str(tmp_path),
                     env={"FAKE_VLLM_RECORD": str(record)})
    with VllmServer(config):
        seen = json.loads(record.read_text())
    assert seen["env"]["TORCHDYNAMO_DISABLE"] is None and seen["env"]["VLLM_HOST_IP"] == "127.0.0.1"


def test_unknown_variant_flag_fails_fast_quoting_the_server(tmp_path):
    python = make_fake_env(tmp_path, "vllm-cpu", with_script=False)
    config = _config(python=str(python), variant_args=("--no-such-flag",),
                     log_dir=str(tmp_path), env={"FAKE_VLLM_RECORD": str(tmp_path / "r")})
    with pytest.raises(ServerExitedEarly) as err:
        VllmServer(config).start()
    message = str(err.value)
    assert "\n" not in message and "exited with code 2" in message
    assert message.endswith("api_server.py: error: unrecognized arguments: --no-such-flag")


def test_whoever_starts_the_server_stops_it(tmp_path):
    """A stream on an unstarted engine starts the server and ``aclose`` (called by
    iterate_blocking at the end) stops it; an engine started by the caller stays up
    across streams until the caller stops it. The stand-in has no completions route, so
    each request comes back as a failure; what matters here is the server's life."""
    python = make_fake_env(tmp_path, "vllm-cpu", with_script=False)
    record = tmp_path / "record.json"
    engine = VllmEngine(_config(python=str(python), log_dir=str(tmp_path),
                                env={"FAKE_VLLM_RECORD": str(record)}),
                        client={"max_attempts": 1, "stream": False})
    request = Request(task="toy", item_id="1", kind="generate", prompt="Hi",
                      gen=GenerationParams(max_gen_toks=2))
    outcomes = list(iterate_blocking(engine, [request]))
    assert [type(o) for o in outcomes] == [EngineFailure] and record.exists()
    assert _session_alive(engine.server.pid) == [] and not engine.server.running
    with engine:
        first_pid = engine.server.pid
        for _ in range(2):
            assert [type(o) for o in iterate_blocking(engine, [request])] == [EngineFailure]
            assert engine.server.running and engine.server.pid == first_pid
    assert _session_alive(first_pid) == [] and not engine.server.running


def test_config_from_a_plan_table_and_per_variant_copies():
    base = launch_config_from_mapping(
        {"model": "/models/tiny", "common_args": ["--enforce-eager"],
         "env": {"TORCHDYNAMO_DISABLE": "0"}}, "plan.toml [engine]")
    assert base == VllmLaunchConfig(model="/models/tiny", common_args=("--enforce-eager",),
                                    env={"TORCHDYNAMO_DISABLE": "0"})
    off = base.for_variant("replay-off", ["--no-swa-bounded-replay"])
    assert (off.label, off.variant_args, off.common_args) == (
        "replay-off", ("--no-swa-bounded-replay",), ("--enforce-eager",))
    with pytest.raises(VllmConfigError, match=r"^plan.toml \[engine\]: unknown vllm "
                                              r"setting\(s\) gpus, tp; known: "):
        launch_config_from_mapping({"model": "m", "tp": 8, "gpus": 8}, "plan.toml [engine]")
    with pytest.raises(VllmConfigError, match=r"^p: vllm engine needs model"):
        launch_config_from_mapping({}, "p")
    with pytest.raises(VllmConfigError, match=r"^p: vllm engine: port must be in 1..65535"):
        launch_config_from_mapping({"model": "m", "port": 0}, "p")
    with pytest.raises(VllmConfigError, match=r"^p: vllm env must be a table of strings"):
        launch_config_from_mapping({"model": "m", "env": {"A": 1}}, "p")
