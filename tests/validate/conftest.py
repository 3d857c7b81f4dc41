"""Fixtures shared by the validate tests."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest


@pytest.fixture
def rng(request) -> np.random.Generator:
    """A generator seeded from the test's own id (its name and parameters), so a test
    draws the same numbers whichever tests ran before it in its worker. One generator per
    module gave each test different draws under each xdist schedule, and one schedule
    drew a case that the test's comparison got wrong."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture(scope="module")
def fake_openai():
    """A real OpenAI-compatible HTTP server on loopback (fake_openai_server.py), one per
    test module; ``.state`` counts calls, full replies and requests in flight."""
    path = Path(__file__).with_name("fake_openai_server.py")
    spec = importlib.util.spec_from_file_location("v41val_fake_openai_server_fixture", path)
    module = sys.modules.get(spec.name)
    if module is None:
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    srv = module.FakeServer().start()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    """The tiny random-weight Llama that the real-vLLM tests serve
    (tests/fixtures/build_tiny_llama.py, run by the vLLM venv's python from
    V41VAL_VLLM_PYTHON), built once per session for every module that serves it."""
    python = os.environ.get("V41VAL_VLLM_PYTHON")
    if not python:
        pytest.skip("V41VAL_VLLM_PYTHON is not set: no vLLM venv (create it with "
                    ".ci/vllm-env.sh)")
    out = tmp_path_factory.mktemp("tiny-llama")
    script = Path(__file__).resolve().parent.parent / "fixtures" / "build_tiny_llama.py"
    done = subprocess.run([python, str(script), str(out)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, f"building the tiny model failed: {done.stderr[-2000:]}"
    return out


TOY_DOCS = [
    {"question": "Is ice cold?", "choices": ["yes", "no"], "answer": 0},
    {"question": "2 + 2 = ?", "choices": ["3", "4", "5"], "answer": 1},
    {"question": "Colour of grass?", "choices": ["green", "red"], "answer": 0},
]


def _write_task(folder: Path, name: str, data: Path, body: str) -> None:
    head = (f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
            f"    test: {data}\ntest_split: test\n")
    (folder / f"{name}.yaml").write_text(head + textwrap.dedent(body).lstrip())


@pytest.fixture
def toy_lmeval_tasks(tmp_path) -> Path:
    """A folder of two tiny local lm-eval tasks over ``TOY_DOCS`` (pass it as an
    ``include_path``): ``v41val_toy_mc`` (multiple choice: loglikelihoods) and
    ``v41val_toy_gen`` (generate_until, 4 tokens, until a blank line)."""
    data = tmp_path / "toy.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in TOY_DOCS))
    _write_task(tmp_path, "v41val_toy_mc", data, """
        output_type: multiple_choice
        doc_to_text: "Question: {{question}}\\nAnswer:"
        doc_to_choice: "{{choices}}"
        doc_to_target: answer
        metric_list:
          - metric: acc
    """)
    _write_task(tmp_path, "v41val_toy_gen", data, """
        output_type: generate_until
        doc_to_text: "Q: {{question}}\\nA:"
        doc_to_target: "{{choices[answer]}}"
        generation_kwargs:
          until: ["\\n\\n"]
          max_gen_toks: 4
          do_sample: false
        metric_list:
          - metric: exact_match
    """)
    return tmp_path
