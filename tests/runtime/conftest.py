"""Fixtures shared by the runtime tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def one_thread():
    """One intra-op thread: the CI machine is small and shared, and the model tests run
    much faster there that way. Use with ``pytestmark = pytest.mark.usefixtures(...)``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
