"""v41val's own time for a plan whose engine needs servers this machine cannot run
(``flash-vllm.toml``: vLLM on four GPUs; ``endpoints.toml``: two running endpoints):
the same tasks, variants (by name), concurrency, warm mode, fidelity settings and
policy, with the engine replaced by one OpenAI-compatible server that answers at once
(``tests/validate/fake_openai_server.py``, in this process). What it measures is
everything but the servers' own work: loading and checking the plan and the tasks,
building and sending every request, storing and scoring every response, the fidelity
pass's bookkeeping, the gate and the report. A real run adds the servers' start-up and
generation on top.

    PYTHONPATH=. python benchmarks/plan_overhead.py validate/plan/examples/flash-vllm.toml

Prints one JSON document: wall and CPU seconds of ``v41val run`` in this process (the
fake server's threads included, so the CPU figure is an upper bound), the exit code
and the number of stored responses.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import resource
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from validate.errors import PlanError
from validate.tomlfile import read_toml

ROOT = Path(__file__).resolve().parent.parent
ENGINE_FREE = ("name", "description", "baseline", "seed", "seeds", "concurrency", "warm",
               "fidelity_prompts", "fidelity_tokens", "tasks", "aa")


def _fake_server():
    path = ROOT / "tests" / "validate" / "fake_openai_server.py"
    spec = importlib.util.spec_from_file_location("v41val_fake_openai_server", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.FakeServer().start()


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {value!r} as TOML")


def overhead_plan(source: Path, base_url: str, folder: Path) -> Path:
    """``source``'s plan with an openai engine at ``base_url`` and its variants emptied
    of engine settings (the policy file copied beside it)."""
    doc = read_toml(source, PlanError, "plan file")
    lines = [f"{k} = {_toml_value(doc[k])}" for k in ENGINE_FREE if k in doc and k != "tasks"]
    policy = doc.get("policy")
    if isinstance(policy, str):
        shutil.copy(source.parent / policy, folder / Path(policy).name)
        lines.append(f"policy = {_toml_value(Path(policy).name)}")
    lines += ["[engine]", 'kind = "openai"', f"base_url = {_toml_value(base_url)}",
              'model = "fake"']
    lines += [f"[variants.{name}]" for name in doc["variants"]]
    for task in doc.get("tasks", []):
        lines.append("[[tasks]]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in task.items()]
    if isinstance(policy, dict):
        lines.append(f"policy = {_toml_value(policy)}")  # an inline table, after the tables
        lines.insert(0, lines.pop())
    path = folder / "plan.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan", type=Path)
    args = parser.parse_args(argv)
    from v41val.cli import main as cli

    server = _fake_server()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        plan = overhead_plan(args.plan, server.base_url, folder)
        start, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the run's own JSON document
                cli(["run", str(plan), "--workspace", str(folder / "ws"), "--json"])
            code = 0
        except SystemExit as stop:
            code = stop.code
        wall = time.perf_counter() - start
        end = resource.getrusage(resource.RUSAGE_SELF)
        with sqlite3.connect(folder / "ws" / "results.sqlite") as db:
            responses = db.execute("SELECT count(*) FROM responses").fetchone()[0]
    server.stop()
    json.dump({"plan": str(args.plan), "wall_s": round(wall, 2),
               "cpu_user_s": round(end.ru_utime - cpu.ru_utime, 2),
               "cpu_sys_s": round(end.ru_stime - cpu.ru_stime, 2), "exit_code": code,
               "responses": responses}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
