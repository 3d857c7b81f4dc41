"""lm-eval's own GSM8K tasks run offline on the shipped data: the override changes where
the documents come from and nothing else (checked against lm-eval's installed YAML read
by lm-eval's own loader, and against the shipped jsonl rows), the console script runs
``--tasks gsm8k`` with the Hub unreachable, names its output folder after the model, and
says whether bounded replay engaged (its counts equal the engine's own)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

lm_eval = pytest.importorskip("lm_eval")

from lm_eval.tasks._yaml_loader import load_yaml  # noqa: E402

from runtime.engine.requests import GenerateRequest  # noqa: E402
from tasks.data_files import DEFAULT_DATA_DIR  # noqa: E402
from validate.errors import ValidateInputError  # noqa: E402
from validate.lmeval_model import V41ValLM, _add_pretrained, engagement_line  # noqa: E402
from validate.lmeval_tasks import GSM8K_TASK_FILES, lm_eval_gsm8k_dir, offline_task_manager  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DATASET_KEYS = {"dataset_path", "dataset_name", "dataset_kwargs"}


def _offline(monkeypatch, tmp_path) -> dict:
    env = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"),
           "HF_DATASETS_CACHE": str(tmp_path / "hf" / "datasets"), "TQDM_DISABLE": "1"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


def test_overrides_change_only_the_data_source(tmp_path, monkeypatch):
    _offline(monkeypatch, tmp_path)
    manager = offline_task_manager(tmp_path / "tasks")
    for name, filename in GSM8K_TASK_FILES.items():
        ours = load_yaml(tmp_path / "tasks" / f"v41val_{name}.yaml", resolve_func=False)
        theirs = load_yaml(lm_eval_gsm8k_dir() / filename, resolve_func=False)
        assert {k: v for k, v in ours.items() if k not in DATASET_KEYS} == \
            {k: v for k, v in theirs.items() if k not in DATASET_KEYS}, name
        assert ours["dataset_path"] == "json" and ours["dataset_name"] is None
    task = manager.load(["gsm8k"])["tasks"]
    (gsm8k,) = task.values()
    shipped = [json.loads(line) for line in (DEFAULT_DATA_DIR / "gsm8k" / "test.jsonl").read_text().splitlines()]
    docs = list(gsm8k.test_docs())
    assert len(docs) == len(shipped) == 1319
    assert [d["question"] for d in docs[:5]] == [d["question"] for d in shipped[:5]]
    assert docs[-1]["answer"] == shipped[-1]["answer"]


def test_console_script_runs_gsm8k_offline(tmp_path, monkeypatch):
    env = {**os.environ, **_offline(monkeypatch, tmp_path), "PYTHONPATH": str(REPO)}
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "validate.lmeval_model", "run", "--model", "v41val",
         "--model_args", "preset=micro,swa=bounded,threads=1,warmup=true", "--tasks", "gsm8k",
         "--limit", "2", "--gen_kwargs", "max_gen_toks=2", "--output_path", str(out)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (result,) = (out / "micro").glob("results_*.json")  # named after the preset, not random
    assert "gsm8k" in json.loads(result.read_text())["results"]
    assert "v41val: generate_until: 2 prompts, 2 hit the prefix cache" in proc.stderr
    assert "encoder replay engaged on 2" in proc.stderr


def test_engagement_counts_are_the_engines_and_a_cold_run_says_so():
    lm = V41ValLM(preset="micro", swa="bounded", batch_size=4)
    shared = tuple(range(5, 5 + 200))
    prompts = [GenerateRequest(prompt_ids=shared + (300 + i,), max_tokens=1) for i in range(3)]
    cold = lm.runtime.generate(prompts)  # one batch, an empty cache: no prompt can hit
    line = engagement_line("generate_until", cold, lm.options, warmup=False)
    assert "3 prompts, 0 hit the prefix cache (0 tokens)" in line and "never engaged" in line
    warm = lm.runtime.generate(prompts)  # the same prompts again: the stored blocks hit
    hits = [r.timings.prefix_hit_tokens for r in warm]
    line = engagement_line("generate_until", warm, lm.options, warmup=False)
    assert all(h > 0 for h in hits)
    assert f"3 prompts, 3 hit the prefix cache ({sum(hits)} tokens); encoder replay engaged on 3" in line


def test_model_args_pretrained_threads_warmup():
    assert V41ValLM(pretrained="micro").source.preset == "micro"
    assert _add_pretrained("preset=micro,swa=bounded") == "pretrained=micro,swa=bounded"
    assert _add_pretrained("pretrained=x,preset=y") == "pretrained=x,preset=y"
    with pytest.raises(ValidateInputError, match="threads: expected 1 to"):
        V41ValLM(preset="micro", threads=0)
    with pytest.raises(ValidateInputError, match="warmup: expected true or false"):
        V41ValLM(preset="micro", warmup="sometimes")
    with pytest.raises(ValidateInputError, match="not both"):
        V41ValLM(pretrained="micro", preset="tiny")
