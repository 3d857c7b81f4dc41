"""An openai-engine run against a server that answers garbage, HTTP 500, JSON without
choices, an empty body or nothing at all: one line that says what the server did (the
status, the first bytes, the request), exit 2; a server that fails only some requests
gives the INVALID verdict with that line on stderr. A real uvicorn stand-in on
loopback (and a bare socket for "nothing at all")."""

from __future__ import annotations

import hashlib
import socket
import threading

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from v41val.cli import main
from validate.engines.loopback import LoopbackServer

GOOD = {"id": "c", "object": "text_completion", "model": "m",
        "choices": [{"index": 0, "text": " 7", "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1}}


def odd(prompt: str) -> bool:
    return hashlib.sha256(prompt.encode()).digest()[0] % 2 == 1


def app_for(mode: str) -> FastAPI:
    app = FastAPI()

    @app.get("/health")
    def health() -> dict:
        return {"ok": True}

    @app.post("/v1/completions")
    async def completions(request: Request):
        if mode == "garbage":
            return PlainTextResponse("<html>502 Bad Gateway</html>")
        if mode == "500":
            return PlainTextResponse("upstream exploded", status_code=500)
        if mode == "nochoices":
            return JSONResponse({"id": "x", "object": "text_completion"})
        if mode == "empty":
            return Response(b"", status_code=200)
        body = await request.json()  # "partial": 500 for half the prompts
        if odd(body["prompt"]):
            return PlainTextResponse("overloaded", status_code=500)
        return JSONResponse(GOOD)

    return app


PLAN = """name = "bad-server"
baseline = "a"
[engine]
kind = "openai"
base_url = "{url}"
model = "m"
stream = false
max_attempts = 2
backoff_base_s = 0.001
timeout_s = 5.0
[variants.a]
[variants.b]
[[tasks]]
name = "testbed_arith"
limit = {limit}
"""


def run(tmp_path, url: str, capsys, limit: int = 2) -> tuple[int, list[str]]:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN.format(url=url, limit=limit))
    code = 0
    try:
        main(["run", str(plan), "--workspace", str(tmp_path / "ws")])
    except SystemExit as exc:
        code = exc.code
    return code, [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]


@pytest.mark.parametrize("mode, said", [
    ("garbage", "answered HTTP 200 (content-type text/plain; charset=utf-8) with a body that "
                "is not JSON: '<html>502 Bad Gateway</html>'"),
    ("500", "2 attempts failed; last: POST {url}/completions answered HTTP 500: upstream "
            "exploded"),
    ("nochoices", "server reply has no field choices (POST {url}/completions, HTTP 200: "
                  "'{{\"id\": \"x\", \"object\": \"text_completion\"}}')"),
    ("empty", "answered HTTP 200 (content-type none) with a body that is not JSON: an empty "
              "body"),
])
def test_a_server_that_answers_nothing_usable_is_one_line_naming_what_it_did(
        tmp_path, capsys, mode, said):
    with LoopbackServer(app_for(mode)) as server:
        code, err = run(tmp_path, server.base_url, capsys)
        said = said.format(url=server.base_url)
    assert code == 2, err
    assert len(err) == 1 and err[0].startswith("v41val: error: "), err
    assert "variant a: 2 of 2 requests failed; the first:" in err[0]
    assert said in err[0], err[0]
    assert "testbed_arith/testbed_arith-000" in err[0]  # the request


def test_a_server_that_closes_the_connection_says_so(tmp_path, capsys):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    stop = threading.Event()

    def hang_up() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.close()

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        code, err = run(tmp_path, url, capsys)
    finally:
        stop.set()
        sock.close()
        thread.join(timeout=5)
    assert code == 2 and len(err) == 1, err
    # which one depends on when the close reaches httpx: before the reply starts, or as a
    # reset while it reads (an empty ReadError, given a sentence by the engine)
    assert (f"POST {url}/completions: RemoteProtocolError: Server disconnected" in err[0]
            or f"POST {url}/completions: ReadError: the connection was closed or reset"
            in err[0]), err[0]


def test_some_failed_requests_give_invalid_with_the_first_failure_on_stderr(tmp_path, capsys):
    import tasks

    task = tasks.get("testbed_arith")
    prompts = [task.render(item).prompt for item in task.items()[:6]]
    failing = sum(odd(p) for p in prompts)
    assert 0 < failing < len(prompts)  # the fixed data splits (else pick another limit)
    with LoopbackServer(app_for("partial")) as server:
        code, err = run(tmp_path, server.base_url, capsys, limit=6)
    assert code == 4, err  # INVALID: coverage below 100 %
    lines = [ln for ln in err if ln.startswith("v41val: variant ")]
    assert len(lines) == 2, err
    for line, variant in zip(lines, "ab", strict=True):
        assert line.startswith(f"v41val: variant {variant}: {failing} of 6 requests failed; "
                               f"the first: EngineUnavailable: testbed_arith/"), line
        assert line.endswith(f"last: POST {server.base_url}/completions answered HTTP 500: "
                             f"overloaded"), line
