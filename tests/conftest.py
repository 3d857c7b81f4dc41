"""Shared fixtures. Tests may read the shipped data in the repo and ../shared/data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parent.parent


def _import_triton_for_the_interpreter() -> None:
    """Without CUDA, fused kernels are tested through Triton's interpreter, which only
    works when ``triton.language`` was first imported with TRITON_INTERPRET=1 (see
    runtime/kernels/backend.py). Import it that way once, before any test can import it
    otherwise, then unset the variable again: only the kernel tests turn it on, so every
    other test still sees fused ops as unavailable on this machine."""
    if torch.cuda.is_available() or "TRITON_INTERPRET" in os.environ:
        return
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        import triton.language  # noqa: F401
    except ImportError:
        pass
    finally:
        del os.environ["TRITON_INTERPRET"]


_import_triton_for_the_interpreter()


def _share_the_cores_between_xdist_workers() -> None:
    """Under pytest-xdist (the README's ``-n auto``) each worker gets its share of the
    cores for torch's intra-op threads: on the 2-core CI machine two workers that each
    kept torch's default of 2 threads would run 4 on 2 cores. Most of the suite's time is
    single-threaded Python (Triton's interpreter), which is why it is split by worker."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


_share_the_cores_between_xdist_workers()


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture
def one_thread():
    """One intra-op thread: the CI machine is small and shared, and the model tests run
    much faster there that way. Use with ``pytestmark = pytest.mark.usefixtures(...)``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
