"""``v41val serve`` as a library: the builtin runtime behind the OpenAI-compatible app.

``ServeConfig`` says which weights (a ``ModelSource``), which runtime options and how
the server batches; ``build_server`` makes the FastAPI app (``runtime.server.app``)
over one runtime engine; ``serve_forever`` runs it with uvicorn (loopback by default);
``BackgroundServer`` runs it on 127.0.0.1 and an ephemeral port in a thread (tests,
the builtin-vs-openai equivalence check, calibration).
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass, field

from runtime.options import RuntimeOptions
from runtime.scheduling import EngineConfig
from validate.engines.builtin_source import ModelSource, WeightsPool
from validate.engines.errors import EngineError
from validate.engines.loopback import LOOPBACK, LoopbackServer, LoopbackServerError
from validate.perturb import Perturbation


@dataclass(frozen=True)
class ServeConfig:
    source: ModelSource = field(default_factory=ModelSource)
    options: RuntimeOptions = field(default_factory=RuntimeOptions)
    host: str = LOOPBACK
    port: int = 8000
    model_name: str | None = None
    scheduling: EngineConfig = field(default_factory=EngineConfig)
    perturb: Perturbation = field(default_factory=Perturbation)

    def __post_init__(self) -> None:
        if not 0 <= self.port < 65536:
            raise EngineError(f"serve: port must be in [0, 65536), got {self.port}")

    @property
    def served_name(self) -> str:
        if self.model_name:
            return self.model_name
        s = self.source
        return f"v41val-{s.preset}" if s.preset else "v41val-checkpoint"

    @property
    def is_loopback(self) -> bool:
        return self.host in (LOOPBACK, "localhost", "::1")


def build_server(config: ServeConfig, pool: WeightsPool | None = None):
    """(FastAPI app, scheduler) serving ``config``."""
    from runtime.build import build_model
    from runtime.server.app import create_app
    from runtime.server.observed import ObservedEngine
    from runtime.server.scheduler import Scheduler

    pool = pool if pool is not None else WeightsPool()
    weights = pool.weights(config.source)
    model = config.perturb.wrap(build_model(config.perturb.apply_weights(weights), config.options,
                                            max_batch=config.scheduling.max_batch_requests))
    engine = ObservedEngine(model, config.source.tokenizer(), config.scheduling)
    scheduler = Scheduler(engine, config.scheduling.max_batch_requests)
    return create_app(scheduler, engine.tokenizer, config.served_name), scheduler


def bind(host: str, port: int) -> socket.socket:
    """The listening socket of ``host:port``, bound before the model loads: a port in
    use or an address this machine does not have is one ``EngineError`` line (uvicorn
    would log it and exit 1 after the weights were built)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise EngineError(f"serve: --host {host!r}: not an address of this machine "
                          f"({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        what = ("is in use (another server listens there; pick another --port)"
                if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror})")
        raise EngineError(f"serve: {host}:{port} {what}") from None
    return sock


def serve_forever(config: ServeConfig, pool: WeightsPool | None = None,
                  sock: socket.socket | None = None) -> None:
    """Serve until interrupted (uvicorn on ``sock``, else ``config.host:config.port``)."""
    import uvicorn

    sock = sock if sock is not None else bind(config.host, config.port)
    app, scheduler = build_server(config, pool)
    try:
        uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
    finally:
        scheduler.stop()
        sock.close()


class BackgroundServer(LoopbackServer):
    """The server on 127.0.0.1:<ephemeral> in a daemon thread, until ``stop``."""

    def __init__(self, config: ServeConfig, pool: WeightsPool | None = None) -> None:
        app, self.scheduler = build_server(config, pool)
        super().__init__(app, name="serve: the server")
        self.app = app
        self.model_name = config.served_name

    def start(self, timeout_s: float = 30.0) -> BackgroundServer:
        try:
            return super().start(timeout_s)
        except LoopbackServerError as exc:
            raise EngineError(str(exc)) from None

    def stop(self) -> None:
        super().stop()
        self.scheduler.stop()
