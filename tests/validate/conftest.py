"""Fixtures shared by the validate tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest


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
