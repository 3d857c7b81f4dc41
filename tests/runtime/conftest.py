"""Fixtures of the runtime tests: for the server tests one weights pool per module and
``v41val serve`` of the module's ``SOURCE`` on a real loopback uvicorn, batching up to 4
requests; for the kernel tests a runner of sm_90 compile scripts in a fresh process, and
for the parity tests (test_kernels_parity_*.py) a registry of fused ops and a fresh input
seed per test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def pool():
    from validate.engines.builtin_source import WeightsPool

    return WeightsPool()


@pytest.fixture(scope="module")
def server(pool, request):
    from runtime.scheduling import EngineConfig
    from validate.engines.builtin_serve import BackgroundServer, ServeConfig

    config = ServeConfig(source=request.module.SOURCE,
                         scheduling=EngineConfig(max_batch_requests=4))
    with BackgroundServer(config, pool) as srv:
        yield srv


@pytest.fixture
def run_sm90_script(tmp_path):
    """A function running a Python script in a fresh process (this session's
    ``triton.language`` was imported for the interpreter, tests/conftest.py, after which
    nothing compiles here) with the repository on its path and its own Triton cache,
    asserting it exits 0 and returning its standard output. Skips where Triton cannot
    compile for CUDA at all (no NVIDIA backend): the scripts compile for sm_90 with the
    ptxas Triton's wheel ships, no GPU involved."""
    try:
        from triton.backends import backends
    except ImportError:
        pytest.skip("triton without backends")
    if "nvidia" not in backends:
        pytest.skip("triton has no NVIDIA backend")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(PYTHONPATH=str(Path(__file__).resolve().parents[2]), TRITON_CACHE_DIR=str(tmp_path),
               TRITON_DEFAULT_FP_FUSION="1")

    def run(script: str) -> str:
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    return run


@pytest.fixture
def fused(monkeypatch):
    """A registry with every op fused: compiled on CUDA, interpreted on CPU (the env
    var is set for this test only, before the kernels are wrapped)."""
    import torch

    from runtime.kernels import KernelRegistry

    cuda = torch.cuda.is_available()
    if not cuda:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    return KernelRegistry("fused", device="cuda" if cuda else "cpu", on_unavailable="error")


@pytest.fixture
def gen():
    """A fresh seed per test (inputs differ run to run), printed so a failure's report
    gives the draw to reproduce it with."""
    import torch

    seed = int.from_bytes(os.urandom(4), "little")
    print(f"input seed {seed}")
    return torch.Generator().manual_seed(seed)
