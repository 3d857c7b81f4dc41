"""Fixtures of the server tests: one weights pool per module and ``v41val serve`` of the
module's ``SOURCE`` on a real loopback uvicorn, batching up to 4 requests."""

from __future__ import annotations

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
