"""``vllm bench serve`` (the real one, from the CPU vLLM venv) runs to completion against
``v41val serve`` of the shipped testbed, with its tokenizer read from the checkpoint's
``tokenizer.json`` by transformers. Needs V41VAL_VLLM_PYTHON (``.ci/vllm-env.sh``)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from runtime import testbed
from validate.engines.builtin_source import ModelSource

VLLM_PYTHON = os.environ.get("V41VAL_VLLM_PYTHON")
CLI = Path(__file__).resolve().parents[2] / ".ci" / "vllm_cli.py"
SOURCE = ModelSource(preset="testbed")  # the shipped checkpoint
PROMPTS, INPUT_LEN, OUTPUT_LEN = 8, 48, 8
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not VLLM_PYTHON, reason="V41VAL_VLLM_PYTHON is not set: no vLLM venv "
                       "(create it with .ci/vllm-env.sh)"),
]


def test_vllm_bench_serve_completes_against_v41val_serve(server, tmp_path):
    done = subprocess.run(
        [VLLM_PYTHON, str(CLI), "bench", "serve", "--backend", "openai", "--base-url", server.root,
         "--endpoint", "/v1/completions", "--model", "v41val-testbed",
         "--tokenizer", str(testbed.TESTBED_DIR), "--dataset-name", "random",
         "--random-input-len", str(INPUT_LEN), "--random-output-len", str(OUTPUT_LEN),
         "--num-prompts", str(PROMPTS), "--max-concurrency", "2", "--seed", "0", "--ignore-eos",
         "--save-result", "--result-dir", str(tmp_path), "--result-filename", "bench.json"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "tokenizer mismatch" not in done.stdout  # the server counts prompts as the client
    result = json.loads((tmp_path / "bench.json").read_text())
    assert result["completed"] == PROMPTS and result.get("failed", 0) == 0
    assert result["total_output_tokens"] == PROMPTS * OUTPUT_LEN  # --ignore-eos is honoured
