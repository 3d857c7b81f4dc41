"""One HTTP call to an OpenAI-compatible server, with retries and client-side timings.

Retried (with exponential backoff and jitter, ``max_attempts`` in all): 5xx and 429
replies, timeouts, connection errors, a stream cut off mid-way. Not retried: other 4xx
(the request is wrong for this server; retrying cannot help) and malformed replies.
The semaphore bounds calls in flight; it is released while backing off so a failing
request does not hold a slot other requests could use.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from validate.engines.errors import (
    EngineError,
    EngineReplyMalformed,
    EngineRequestRejected,
    EngineUnavailable,
)
from validate.engines.openai_config import OpenAIEngineConfig
from validate.engines.openai_parse import StreamAccumulator


class _Retryable(Exception):
    """An attempt failed in a way another attempt may not."""


@dataclass(frozen=True)
class CallResult:
    """What one successful call returned: the reply JSON (or the stream's accumulator),
    when it was sent (epoch), its duration, the arrival times of output pieces (seconds
    since sending), and how many attempts it took."""

    reply: Mapping | None
    stream: StreamAccumulator | None
    started_at_s: float
    e2e_s: float
    arrivals_s: tuple[float, ...]
    attempts: int


def one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def first_bytes(text: str, limit: int = 120) -> str:
    """The start of what a server sent, quoted, for a one-line error ("an empty body")."""
    return repr(one_line(text, limit)) if text.strip() else "an empty body"


def server_message(response: httpx.Response) -> str:
    """The server's own words from an error reply: OpenAI's ``error.message``,
    FastAPI's ``detail``, or the body text."""
    try:
        body = response.json()
    except ValueError:
        return one_line(response.text) or response.reason_phrase
    if isinstance(body, Mapping):
        err = body.get("error")
        if isinstance(err, Mapping) and err.get("message"):
            return one_line(err["message"])
        for key in ("detail", "message", "error"):
            if body.get(key):
                return one_line(body[key] if isinstance(body[key], str) else json.dumps(body[key]))
    return one_line(response.text)


class HttpCaller:
    """Makes calls for one engine session: shared client, semaphore and jitter source."""

    def __init__(self, config: OpenAIEngineConfig, client: httpx.AsyncClient) -> None:
        self.config = config
        self.client = client
        self.slots = asyncio.Semaphore(config.concurrency)
        self.rng = random.Random(config.jitter_seed)

    def backoff_s(self, attempt: int) -> float:
        c = self.config
        return min(c.backoff_max_s, c.backoff_base_s * 2 ** (attempt - 1)) * (
            0.5 + 0.5 * self.rng.random())

    async def call(self, path: str, body: Mapping, label: str, *, stream: bool,
                   chat: bool) -> CallResult:
        url = self.config.root + path
        last = ""
        for attempt in range(1, self.config.max_attempts + 1):
            try:
                async with self.slots:
                    return await self._attempt(url, body, label, stream, chat, attempt)
            except _Retryable as exc:
                last = str(exc)
            except EngineError as exc:
                exc.attempts = attempt
                raise
            if attempt < self.config.max_attempts:
                await asyncio.sleep(self.backoff_s(attempt))
        error = EngineUnavailable(f"{label}: {self.config.max_attempts} attempts failed; "
                                  f"last: {last}")
        error.attempts = self.config.max_attempts
        raise error

    async def _attempt(self, url: str, body: Mapping, label: str, stream: bool, chat: bool,
                       attempt: int) -> CallResult:
        started_at = time.time()
        t0 = time.perf_counter()
        try:
            if not stream:
                response = await self.client.post(url, json=body)
                self._check_status(response, url, label)
                try:
                    reply = response.json()
                except ValueError:
                    raise EngineReplyMalformed(
                        f"{label}: POST {url} answered HTTP {response.status_code} "
                        f"({_content_type(response)}) with a body that is not JSON: "
                        f"{first_bytes(response.text)}") from None
                if not isinstance(reply, Mapping):
                    raise EngineReplyMalformed(
                        f"{label}: POST {url} answered HTTP {response.status_code} with JSON "
                        f"that is not an object: {first_bytes(response.text)}")
                return CallResult(reply, None, started_at, time.perf_counter() - t0, (), attempt)
            acc = StreamAccumulator(chat=chat, label=label)
            arrivals: list[float] = []
            done = False
            skipped = ""  # the first bytes that were not an SSE data line, for the error
            async with self.client.stream("POST", url, json=body) as response:
                if response.status_code >= 400:
                    await response.aread()
                self._check_status(response, url, label)
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        if len(skipped) < 120 and line.strip():
                            skipped += line + " "
                        continue  # blank separators, comments, event: lines
                    data = line[5:].strip()
                    if data == "[DONE]":
                        done = True
                        break
                    now = time.perf_counter() - t0
                    try:
                        chunk = json.loads(data)
                    except ValueError:
                        raise EngineReplyMalformed(
                            f"{label}: stream chunk {acc.n_chunks + 1} from {url} is not JSON: "
                            f"{one_line(data, 120)}") from None
                    n_before = len(acc.arrivals)
                    try:
                        acc.feed(chunk, now)
                    except EngineReplyMalformed as exc:
                        raise EngineReplyMalformed(f"{exc} (POST {url}, HTTP "
                                                   f"{response.status_code}: "
                                                   f"{first_bytes(data)})") from None
                    if len(acc.arrivals) > n_before:
                        arrivals.append(now)
            if not done:
                sent = (f"after {acc.n_chunks} data chunks" if acc.n_chunks else
                        f"with no 'data:' line ({_content_type(response)}; "
                        f"{first_bytes(skipped)})")
                raise _Retryable(f"POST {url}: HTTP {response.status_code} stream ended "
                                 f"without [DONE] {sent}")
            return CallResult(None, acc, started_at, time.perf_counter() - t0, tuple(arrivals),
                              attempt)
        except httpx.TimeoutException as exc:
            raise _Retryable(f"POST {url}: timeout ({type(exc).__name__})") from None
        except httpx.TransportError as exc:
            detail = one_line(str(exc), 120) or _TRANSPORT_SILENT.get(
                type(exc).__name__, "no detail from the transport")
            raise _Retryable(f"POST {url}: {type(exc).__name__}: {detail}") from None

    @staticmethod
    def _check_status(response: httpx.Response, url: str, label: str) -> None:
        code = response.status_code
        if code < 400:
            return
        message = server_message(response) or "an empty body"
        if code >= 500 or code == 429:
            raise _Retryable(f"POST {url} answered HTTP {code}: {message}")
        raise EngineRequestRejected(f"{label}: POST {url} answered HTTP {code}: {message}", code)


# httpx raises some transport errors with an empty message (a reset connection is a
# ReadError with no text); say what the server did instead of nothing
_TRANSPORT_SILENT = {
    "ReadError": "the connection was closed or reset while reading the reply",
    "WriteError": "the connection was closed or reset while sending the request",
    "ConnectError": "could not connect",
    "RemoteProtocolError": "the server broke the HTTP protocol",
}


def _content_type(response: httpx.Response) -> str:
    return f"content-type {response.headers.get('content-type') or 'none'}"


def client_for(config: OpenAIEngineConfig) -> httpx.AsyncClient:
    timeout = httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s)
    limits = httpx.Limits(max_connections=config.concurrency,
                          max_keepalive_connections=config.concurrency)
    headers: dict[str, Any] = {}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    return httpx.AsyncClient(timeout=timeout, limits=limits, headers=headers)
