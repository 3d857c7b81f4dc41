"""``v41val serve`` under bad neighbours (micro model, real uvicorn on loopback): one
request's bad input never fails the requests batched with it; a streaming client that
disconnects stops being generated; bodies over the cap are refused before parsing;
unknown paths and methods answer in the OpenAI error shape; a port in use is one line,
exit 2."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest

from runtime.engine.requests import GenerateRequest
from runtime.model import V41Model
from runtime.options import RuntimeOptions
from runtime.scheduling import EngineConfig
from runtime.server.observed import ObservedEngine
from runtime.server.scheduler import Job, Scheduler
from validate.engines.builtin_source import ModelSource

SOURCE = ModelSource.micro(seed=3)


def _engine(pool) -> ObservedEngine:
    return ObservedEngine(V41Model(pool.weights(SOURCE), RuntimeOptions()), SOURCE.tokenizer(),
                          EngineConfig(max_batch_requests=4))


async def _drain(job: Job):
    tokens = 0
    while True:
        event = await job.events.get()
        if event[0] == "token":
            tokens += 1
        else:
            return event, tokens


def _batched(scheduler: Scheduler, requests: list[GenerateRequest]) -> list:
    """Queue every request before the worker starts, so they form one batch."""

    async def go():
        loop = asyncio.get_running_loop()
        jobs = [Job(r, loop) for r in requests]
        for job in jobs:
            scheduler._queue.put(job)
        scheduler.start()
        return await asyncio.gather(*(_drain(j) for j in jobs))

    try:
        return asyncio.run(go())
    finally:
        scheduler.stop()


def test_a_request_that_breaks_its_batch_fails_alone(pool):
    """A seed of 2**70 gets past no check (it is queued directly): the batch fails with
    torch's OverflowError, and its neighbours are run again alone and answer."""
    scheduler = Scheduler(_engine(pool), max_batch=4)
    good = GenerateRequest(prompt="hello there", max_tokens=3, temperature=1.0, seed=5)
    bad = GenerateRequest(prompt="hello again", max_tokens=3, temperature=1.0, seed=2**70)
    outcomes = _batched(scheduler, [good, bad, good])
    (first, _), (middle, _), (last, _) = outcomes
    assert first[0] == "done" and last[0] == "done"
    assert first[1].token_ids == last[1].token_ids and len(first[1].token_ids) == 3
    assert middle[0] == "error" and "overflow" in str(middle[1]).lower()


def test_the_scheduler_refuses_such_a_seed_before_queueing(pool):
    from runtime.server.errors import ServerInputError

    scheduler = Scheduler(_engine(pool), max_batch=4)
    with pytest.raises(ServerInputError, match=r"seed: expected an integer in \[0, 2\*\*63\)"):
        scheduler.check(GenerateRequest(prompt="x", seed=2**70))


def test_a_cancelled_job_ends_at_its_next_step_and_its_neighbour_goes_on(pool):
    scheduler = Scheduler(_engine(pool), max_batch=4)
    long = GenerateRequest(prompt="a long one", max_tokens=400, ignore_eos=True)
    short = GenerateRequest(prompt="a short one", max_tokens=12, ignore_eos=True)

    async def go():
        loop = asyncio.get_running_loop()
        jobs = [Job(long, loop), Job(short, loop)]
        for job in jobs:
            scheduler._queue.put(job)
        scheduler.start()
        first = await jobs[0].events.get()
        assert first[0] == "token"
        jobs[0].cancel()  # the client left after one token
        return await asyncio.gather(*(_drain(j) for j in jobs))

    try:
        (long_end, _), (short_end, _) = asyncio.run(go())
    finally:
        scheduler.stop()
    assert long_end[0] == "done" and long_end[1].finish_reason == "abort"
    assert len(long_end[1].token_ids) < 40  # stopped within a few steps, not at 400
    assert short_end[0] == "done" and len(short_end[1].token_ids) == 12


def _post(server, path, body, **kw):
    return httpx.post(f"{server.base_url}{path}", json=body, timeout=120, **kw)


def test_an_out_of_range_seed_is_a_400_and_its_neighbours_answer(server):
    async def go():
        async with httpx.AsyncClient(base_url=server.base_url, timeout=120) as client:
            bodies = [{"prompt": "one", "max_tokens": 2, "temperature": 1.0, "seed": 1},
                      {"prompt": "two", "max_tokens": 2, "temperature": 1.0, "seed": 2**70},
                      {"prompt": "three", "max_tokens": 2, "temperature": 1.0, "seed": 3}]
            return await asyncio.gather(*(client.post("/completions", json=b) for b in bodies))

    replies = asyncio.run(go())
    assert [r.status_code for r in replies] == [200, 400, 200]
    assert "seed" in replies[1].json()["error"]["message"]


@pytest.fixture
def finished(server, monkeypatch) -> list:
    """Every result the server's engine finishes while the test runs."""
    engine = server.scheduler.engine
    seen = []
    original = engine._result

    def record(live, now_s):
        result = original(live, now_s)
        seen.append(result)
        return result

    monkeypatch.setattr(engine, "_result", record)
    return seen


def test_a_disconnected_stream_is_cancelled(server, finished):
    """Read one chunk of a 3,000-token stream, hang up; the engine's result for it is
    an abort after a few tokens, and the next request is answered."""
    body = {"prompt": "go on and on", "max_tokens": 3000, "ignore_eos": True, "stream": True}
    with httpx.Client(timeout=120) as client, \
            client.stream("POST", f"{server.base_url}/completions", json=body) as reply:
        for line in reply.iter_lines():
            if line.startswith("data:"):
                break  # the client leaves after its first chunk
    ok = _post(server, "/completions", {"prompt": "next", "max_tokens": 1})
    assert ok.status_code == 200
    aborted = [r for r in finished if r.finish_reason == "abort"]
    assert len(aborted) == 1 and len(aborted[0].token_ids) < 3000


def test_a_non_streaming_client_that_leaves_is_cancelled(server, finished):
    """A 3,000-token answer whose client gives up after 1 s: the server notices the
    disconnect, the engine aborts it, and the next request is answered."""
    body = {"prompt": "keep talking", "max_tokens": 3000, "ignore_eos": True}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.base_url}/completions", json=body,
                   timeout=httpx.Timeout(120, read=1.0))
    ok = _post(server, "/completions", {"prompt": "next", "max_tokens": 1})
    assert ok.status_code == 200
    aborted = [r for r in finished if r.finish_reason == "abort"]
    assert len(aborted) == 1 and len(aborted[0].token_ids) < 3000


def test_a_body_over_the_cap_is_413_before_it_is_parsed(pool):
    from runtime.server.app import create_app
    from validate.engines.loopback import LoopbackServer

    scheduler = Scheduler(_engine(pool), max_batch=2)
    app = create_app(scheduler, SOURCE.tokenizer(), "m", max_body_bytes=1000)
    with LoopbackServer(app) as srv:
        big = httpx.post(f"{srv.base_url}/completions", json={"prompt": "x" * 5000}, timeout=60)

        def chunks():
            yield b'{"prompt": "'
            for _ in range(10):
                yield b"y" * 500
            yield b'"}'

        chunked = httpx.post(f"{srv.base_url}/completions", content=chunks(), timeout=60,
                             headers={"content-type": "application/json"})
        small = httpx.post(f"{srv.base_url}/completions", json={"prompt": "x", "max_tokens": 1},
                           timeout=60)
    scheduler.stop()
    for reply in (big, chunked):
        assert reply.status_code == 413, reply.text
        error = reply.json()["error"]
        assert error["code"] == 413 and "over this server's limit of 1,000 bytes" in \
            error["message"]
    assert small.status_code == 200


def test_unknown_paths_and_methods_answer_in_the_openai_shape(server):
    for reply, status in ((httpx.get(f"{server.base_url}/nowhere", timeout=30), 404),
                          (httpx.get(f"{server.base_url}/completions", timeout=30), 405),
                          (httpx.post(f"{server.base_url}/completions", content=b"{",
                                      headers={"content-type": "application/json"},
                                      timeout=30), 400)):
        assert reply.status_code == status
        error = reply.json()["error"]
        assert set(error) == {"message", "type", "code"} and error["code"] == status
        assert "detail" not in reply.json()


def test_serve_on_a_port_in_use_is_one_line_exit_2(capsys):
    from v41val.cli import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(SystemExit) as info:
            main(["serve", "--preset", "micro", "--port", str(port)])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert info.value.code == 2
    assert err == [f"v41val: error: serve: 127.0.0.1:{port} is in use (another server "
                   f"listens there; pick another --port)"]
