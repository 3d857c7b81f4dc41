"""Bad input, by class, through the real command line: exit 2, one line naming the
file / field / flag and what was expected, and every file already there byte-identical
afterwards (hashed before and after). The classes: every file the CLI reads (not UTF-8,
malformed), every device option, every path option, every numeric or list flag, and
the engine settings of a plan (checked before the store is touched)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
from pathlib import Path

import pytest

from v41val.cli import main

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "reports"))
from store_fixture import PlanSpec, add_plan  # noqa: E402

from validate.store import ResultsStore  # noqa: E402

TASK = "mini_math"


def _tiny_config() -> bytes:
    import tempfile

    from runtime.checkpoint.io import write_config
    from runtime.config import V41Config

    with tempfile.TemporaryDirectory() as folder:
        write_config(V41Config.preset("tiny"), Path(folder), "unquantized")
        return (Path(folder) / "config.json").read_bytes()


CHECKPOINT_CONFIG = _tiny_config()
NOT_UTF8 = b"\xff\xfe name = 'x'\n"


def samples_line(doc_id: int, value: float, **override) -> dict:
    line = {"doc_id": doc_id, "filter": "flexible-extract", "metrics": ["exact_match"],
            "exact_match": value, "prompt_hash": f"p{doc_id}",
            "arguments": {"gen_args_0": {"arg_0": f"Q{doc_id}", "arg_1": {"until": ["\n"]}}},
            "resps": [[f"A {value}"]], "filtered_resps": [f"{value}"]}
    line.update(override)
    return line


def write_samples(folder: Path, lines: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"samples_{TASK}_2026-12-01T00-00-00.000001.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


PLAN = """name = "bad-input"
baseline = "a"
seed = {seed}
[engine]
kind = "builtin"
preset = "micro"
device = "{device}"
dtype = "{dtype}"
[variants.a]
swa = "exact"
[variants.b]
swa = "bounded"
[[tasks]]
name = "testbed_arith"
limit = 2
"""

OPENAI_PLAN = """name = "bad-openai"
baseline = "a"
[engine]
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
model = "m"
{setting}
[variants.a]
[variants.b]
[[tasks]]
name = "testbed_arith"
limit = 2
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    """A folder of inputs: a real store with one plan, plans, samples, files that are
    in the way. Every test hashes all of it before and after."""
    root = tmp_path_factory.mktemp("bad-inputs")
    ws = root / "ws"
    ws.mkdir()
    with ResultsStore.open(ws / "results.sqlite") as store:
        add_plan(store, PlanSpec(plan_hash="f" * 64, outcomes={"a": [1, 0, 1, 1],
                                                               "b": [1, 1, 0, 1]}))
    (root / "afile").write_text("not a folder\n")
    (root / "adir").mkdir()
    (root / "not-utf8.toml").write_bytes(NOT_UTF8)
    (root / "not-utf8.jsonl").write_bytes(NOT_UTF8)
    (root / "foreign.sqlite").write_bytes(b"")
    conn = sqlite3.connect(root / "foreign.sqlite")
    conn.execute("CREATE TABLE contacts (name TEXT)")
    conn.execute("INSERT INTO contacts VALUES ('x')")
    conn.commit()
    conn.close()
    (root / "empty.sqlite").write_bytes(b"")
    good = [samples_line(i, float(i % 2)) for i in range(4)]
    write_samples(root / "good", good)
    write_samples(root / "metrics-number", [samples_line(0, 1.0, metrics=3), *good[1:]])
    write_samples(root / "metrics-string", [samples_line(0, 1.0, metrics="exact_match")])
    write_samples(root / "bad-arguments", [*good[:3], samples_line(3, 1.0, arguments={
        "gen_args_0": {"arg_7": "?"}})])
    for name, fields in {"bad-dtype": {"dtype": "float8"}, "bad-device": {"device": "gpu"},
                         "bad-seed": {"seed": -1}}.items():
        values = {"seed": 1, "device": "cpu", "dtype": "float32", **fields}
        (root / f"{name}.toml").write_text(PLAN.format(**values))
    (root / "cuda-device.toml").write_text(PLAN.format(seed=1, device="cuda:7",
                                                       dtype="float32"))
    plain = PLAN.format(seed=1, device="cpu", dtype="float32")
    (root / "good-plan.toml").write_text(plain)
    for name, (after, extra) in {
            "unknown-override": ('dtype = "float32"\n', "overrides = { nonsense_field = 3 }\n"),
            "temperature-nan": ("limit = 2\n", "temperature = nan\n"),
            "noise-inf": ('swa = "bounded"\n', "perturb = { logit_noise = inf }\n")}.items():
        (root / f"{name}.toml").write_text(plain.replace(after, after + extra, 1))
    for name, setup in {"ck-truncated": lambda d: (d / "model.safetensors").write_bytes(b"xx"),
                        "ck-config-not-utf8": lambda d: (d / "config.json").write_bytes(NOT_UTF8),
                        }.items():
        folder = root / name
        folder.mkdir()
        (folder / "config.json").write_bytes(CHECKPOINT_CONFIG)
        setup(folder)
    for name, setting in {"timeout": "timeout_s = -1.0", "connect": "connect_timeout_s = 0.0",
                          "backoff": "backoff_base_s = -0.5"}.items():
        (root / f"openai-{name}.toml").write_text(OPENAI_PLAN.format(setting=setting))
    (root / "policy.toml").write_text(f'[tasks.{TASK}]\nmargin = 10.0\n'
                                      f'metric = "exact_match,flexible-extract"\n')
    fidelity = root / "fid" / "fidelity"
    fidelity.mkdir(parents=True)
    with ResultsStore.open(root / "fid" / "results.sqlite") as store:
        add_plan(store, PlanSpec(plan_hash="e" * 64, outcomes={"a": [1, 0], "b": [1, 1]}))
    (fidelity / f"{'e' * 64}.json").write_text('{"records": {"b": {"mini_math": 5}}}')
    return root


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def sqlite_side_file(name: str) -> bool:
    """SQLite's own -wal/-shm files, which a reader of a WAL store may leave (empty WAL)."""
    return name.endswith(("-wal", "-shm"))


def run_cli(args: list[str], capsys) -> tuple[int, list[str]]:
    with pytest.raises(SystemExit) as info:
        main(args)
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    return info.value.code, err


def check_refused(world: Path, capsys, args: list[str], expected: str) -> None:
    before = snapshot(world)
    code, err = run_cli([a.replace("{w}", str(world)) for a in args], capsys)
    assert code == 2, err
    assert len(err) == 1 and err[0].startswith("v41val: error: "), err
    assert expected in err[0], err[0]
    after = snapshot(world)
    for name, digest in before.items():
        assert after.get(name) == digest, f"{name} changed or vanished"
    new = sorted(set(after) - set(before))
    assert all(sqlite_side_file(n) for n in new), new
    for name in new:
        if name.endswith("-wal"):
            assert (world / name).stat().st_size == 0, name


FILES = {
    "plan not UTF-8": (["run", "{w}/not-utf8.toml", "--workspace", "{w}/ws"],
                       "not-utf8.toml: cannot read plan file: expected UTF-8 text, found byte 0xff"),
    "policy not UTF-8": (["report", "latest", "--store", "{w}/ws/results.sqlite", "--policy",
                          "{w}/not-utf8.toml"], "cannot read policy file: expected UTF-8"),
    "samples not UTF-8 (compare)": (["compare", "{w}/not-utf8.jsonl", "{w}/good"],
                                    "cannot read lm-eval samples file: expected UTF-8"),
    "samples not UTF-8 (plan --from-aa)": (
        ["plan", "--margin", "1", "--from-aa", "{w}/not-utf8.jsonl", "{w}/not-utf8.jsonl"],
        "cannot read lm-eval samples file: expected UTF-8"),
    "samples metrics a number": (["compare", "{w}/good", "{w}/metrics-number"],
                                 "field 'metrics': expected a list of metric names, got 3"),
    "samples metrics a string": (["gate", "{w}/good", "{w}/metrics-string", "--policy",
                                  "{w}/policy.toml"], "field 'metrics': expected a list"),
    "samples arguments malformed (import)": (
        ["import-lmeval", "a={w}/good", "b={w}/bad-arguments", "--baseline", "a", "--store",
         "{w}/ws/results.sqlite"], "doc 3: field 'arguments'"),
    "checkpoint: a truncated safetensors file": (
        ["serve", "--check", "--checkpoint", "{w}/ck-truncated"],
        "ck-truncated/model.safetensors: truncated"),
    "checkpoint: config.json not UTF-8": (
        ["calibrate", "--checkpoint", "{w}/ck-config-not-utf8"],
        "ck-config-not-utf8/config.json: cannot read"),
    "corrupt fidelity file": (["report", "latest", "--store", "{w}/fid/results.sqlite"],
                              "corrupt legacy fidelity file: records.b.mini_math: expected a "
                              "list"),
    "another application's SQLite (report)": (
        ["report", "latest", "--store", "{w}/foreign.sqlite"], "not a v41val results store"),
    "another application's SQLite (history)": (
        ["history", "--store", "{w}/foreign.sqlite"], "not a v41val results store"),
    "another application's SQLite (compare)": (
        ["compare", "a", "b", "--store", "{w}/foreign.sqlite"], "not a v41val results store"),
    "another application's SQLite (import)": (
        ["import-lmeval", "a={w}/good", "b={w}/good", "--baseline", "a", "--store",
         "{w}/foreign.sqlite"], "not a v41val results store"),
    "an empty file as the store (history)": (["history", "--store", "{w}/empty.sqlite"],
                                             "not a v41val results store (an empty file)"),
}

ENGINE_SETTINGS = {
    "dtype": (["run", "{w}/bad-dtype.toml", "--workspace", "{w}/ws"],
              "bad-dtype.toml: variants.a: builtin engine: dtype must be one of"),
    "device spelling": (["run", "{w}/bad-device.toml", "--workspace", "{w}/ws"],
                        "device: expected cpu, cuda or cuda:N, got 'gpu'"),
    "plan seed": (["run", "{w}/bad-seed.toml", "--workspace", "{w}/ws"],
                  "seed: expected an integer in [0, 2**63), got -1"),
    "unknown config override": (["run", "{w}/unknown-override.toml", "--workspace", "{w}/ws"],
                                "V41Config: unknown field 'nonsense_field'"),
    "temperature nan": (["run", "{w}/temperature-nan.toml", "--workspace", "{w}/ws"],
                        "tasks[0].temperature: expected a finite number, got nan"),
    "planted noise inf": (["run", "{w}/noise-inf.toml", "--workspace", "{w}/ws"],
                          "perturb.logit_noise: expected a finite number >= 0, got inf"),
    "openai timeout_s": (["run", "{w}/openai-timeout.toml", "--workspace", "{w}/ws"],
                         "timeout_s must be > 0 seconds, got -1.0"),
    "openai connect_timeout_s": (["run", "{w}/openai-connect.toml", "--workspace", "{w}/ws"],
                                 "connect_timeout_s must be > 0 seconds, got 0.0"),
    "openai backoff": (["run", "{w}/openai-backoff.toml", "--workspace", "{w}/ws"],
                       "backoff_base_s must be >= 0 seconds"),
}

PATHS = {
    "--workspace a regular file": (["run", "{w}/good-plan.toml", "--workspace", "{w}/afile"],
                                   "--workspace {w}/afile: exists and is not a directory"),
    "--workspace cannot be created": (
        ["demo", "--workspace", "{w}/afile/sub"], "--workspace {w}/afile/sub: cannot create"),
    "-o an existing directory": (["report", "latest", "--store", "{w}/ws/results.sqlite",
                                  "-o", "adir", "--out-dir", "{w}"],
                                 "adir: is a directory (expected a file name)"),
    "--out-dir a regular file": (["history", "--store", "{w}/ws/results.sqlite", "-o", "h.json",
                                  "--format", "json", "--out-dir", "{w}/afile"],
                                 "--out-dir {w}/afile: is not a directory"),
    "-o under a regular file": (["report", "latest", "--store", "{w}/ws/results.sqlite", "-o",
                                 "afile/r.md", "--out-dir", "{w}"], "afile is not a directory"),
    "import --store under a regular file": (
        ["import-lmeval", "a={w}/good", "b={w}/good", "--baseline", "a", "--store",
         "{w}/afile/r.sqlite"], "--store {w}/afile: exists and is not a directory"),
    "init-checkpoint into a regular file": (["init-checkpoint", "{w}/afile"],
                                            "afile: exists and is not a directory"),
    "tasks check --data-dir a regular file": (["tasks", "check", "--data-dir", "{w}/afile"],
                                              "--data-dir {w}/afile: is not a directory"),
    "calibrate --markdown a directory": (["calibrate", "--quality", "--markdown", "{w}/adir"],
                                         "--markdown {w}/adir: is a directory"),
}

NUMBERS = {
    "--bootstrap 10**15 (a MemoryError before)": (
        ["compare", "a", "b", "--store", "{w}/ws/results.sqlite", "--bootstrap", str(10**15)],
        "--bootstrap: replicates must be in [100, 1,000,000]"),
    "--seed -1 (compare)": (["compare", "a", "b", "--store", "{w}/ws/results.sqlite",
                             "--seed", "-1"], "--seed: the bootstrap seed must be"),
    "--seed -1 (gate)": (["gate", "{w}/good", "{w}/good", "--policy", "{w}/policy.toml",
                          "--seed", "-1"], "--seed: the bootstrap seed must be"),
    "--seed -1 (init-checkpoint)": (["init-checkpoint", "{w}/ck", "--seed", "-1"],
                                    "seed: expected an integer in [0, 2**63), got -1"),
    "--seed 2**70 (serve)": (["serve", "--check", "--seed", str(2**70)],
                             "seed: expected an integer in [0, 2**63)"),
    "history --metric that no run stored": (
        ["history", "--store", "{w}/ws/results.sqlite", "--metric", "nope"],
        "--metric 'nope': no stored scores under it (stored: flexible-extract)"),
    "calibrate --noise abc": (["calibrate", "--noise", "abc"],
                              "--noise: expected comma-separated numbers, got 'abc'"),
    "calibrate --max-new-tokens 0": (["calibrate", "--max-new-tokens", "0"],
                                     "--max-new-tokens: expected >= 1, got 0"),
    "calibrate --concurrency 0": (["calibrate", "--quality", "--concurrency", "0"],
                                  "--concurrency: expected >= 1, got 0"),
    "serve --port 70000": (["serve", "--check", "--port", "70000"], "port must be in"),
    "serve --host that is no address here": (
        ["serve", "--preset", "micro", "--host", "no-such-host.invalid"],
        "--host 'no-such-host.invalid': not an address of this machine"),
    "demo --threads 100000 (a segfault before)": (["demo", "--threads", "100000"],
                                                  "--threads: expected 1 to"),
    "calibrate --noise inf": (["calibrate", "--noise", "inf"],
                              "perturb.logit_noise: expected a finite number >= 0, got inf"),
}


@pytest.mark.parametrize("case", list(FILES), ids=list(FILES))
def test_a_malformed_file_is_one_line_and_changes_nothing(world, capsys, case):
    args, expected = FILES[case]
    check_refused(world, capsys, args, expected.replace("{w}", str(world)))


@pytest.mark.parametrize("case", list(ENGINE_SETTINGS), ids=list(ENGINE_SETTINGS))
def test_a_bad_engine_setting_fails_before_the_store_is_written(world, capsys, case):
    args, expected = ENGINE_SETTINGS[case]
    check_refused(world, capsys, args, expected)


@pytest.mark.parametrize("case", list(PATHS), ids=list(PATHS))
def test_a_bad_path_option_is_one_line(world, capsys, case):
    args, expected = PATHS[case]
    check_refused(world, capsys, args, expected.replace("{w}", str(world)))


@pytest.mark.parametrize("case", list(NUMBERS), ids=list(NUMBERS))
def test_a_bad_number_is_one_line(world, capsys, case):
    args, expected = NUMBERS[case]
    check_refused(world, capsys, args, expected)


def _no_cuda() -> bool:
    import torch

    return not torch.cuda.is_available()


@pytest.mark.skipif(not _no_cuda(), reason="this machine has CUDA: the refusal is for one "
                                           "without")
@pytest.mark.parametrize("args", [
    ["run", "{w}/cuda-device.toml", "--workspace", "{w}/ws"],
    ["serve", "--check", "--device", "cuda"],
    ["calibrate", "--device", "cuda:0"],
    ["demo", "--device", "cuda", "--workspace", "{w}/ws"],
], ids=["run plan", "serve", "calibrate", "demo"])
def test_a_cuda_device_without_cuda_is_one_line(world, capsys, args):
    check_refused(world, capsys, args, "needs a CUDA device, but this machine has none")


def test_a_cuda_index_past_the_devices_is_refused(monkeypatch):
    """The index check, with torch's answer for a one-GPU machine stood in."""
    import torch

    from runtime.devices import check_device
    from runtime.errors import ConfigError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert check_device("cuda:0") == "cuda:0"
    with pytest.raises(ConfigError, match=r"'cuda:7' names CUDA device 7, but this machine "
                                          r"has 1 \(cuda:0..cuda:0\)"):
        check_device("cuda:7", "engine.device")


def test_a_refused_plan_creates_no_workspace(world, capsys):
    fresh = world / "fresh-workspace"
    check_refused(world, capsys, ["run", "{w}/bad-dtype.toml", "--workspace", str(fresh)],
                  "dtype must be one of")
    assert not fresh.exists()
