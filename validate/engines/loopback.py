"""An ASGI app served by uvicorn on 127.0.0.1 and an ephemeral port, in a daemon thread.

Used by ``v41val``'s in-process servers (the builtin runtime behind the OpenAI API for
the equivalence check and calibration) and by tests that need a real HTTP server rather
than a mock. Binding the socket first gives the port before the server starts; readiness
is "``/health`` answers 200", polled with a deadline (no fixed sleeps).
"""

from __future__ import annotations

import socket
import threading
import time

LOOPBACK = "127.0.0.1"


class LoopbackServerError(RuntimeError):
    """The server did not come up (a bug or a broken environment, not user input)."""


class LoopbackServer:
    """``app`` on ``http://127.0.0.1:<port>`` until ``stop``; a context manager too."""

    def __init__(self, app, name: str = "server") -> None:
        import uvicorn

        self.name = name
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((LOOPBACK, 0))
        self.port = self.sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       daemon=True)

    @property
    def root(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def start(self, timeout_s: float = 30.0) -> LoopbackServer:
        import httpx

        self.thread.start()
        pause = threading.Event()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.root}/health", timeout=1.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pause.wait(0.02)
        raise LoopbackServerError(f"{self.name} on {self.root} did not answer /health within "
                                  f"{timeout_s:.0f} s")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
