"""The engine protocol: turn ``tasks.request.Request``s into responses plus timings.

An engine streams results back in completion order (not input order) so the caller can
commit each one to the results store the moment it exists (docs/design.md, principle 6): a killed
run loses only what was in flight. Failures of single requests come back as
``EngineFailure`` values instead of aborting the whole run, so one rejected item never
costs the others; the caller records it and coverage reports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from tasks.request import Generation, Loglikelihoods, Request
from validate.engines.engagement import Engagement


@dataclass(frozen=True)
class Timings:
    """Wall-clock timings of one request, measured by the client.

    ``ttft_s`` is the time from sending the request to the first non-empty piece of
    output; ``itl_s`` are the gaps between successive output pieces of a stream (one per
    server chunk, normally one token); ``e2e_s`` runs until the last byte. Without
    streaming only ``e2e_s`` is known. ``started_at_s`` is the epoch time the request was
    sent, so throughput over a run window can be computed from stored rows.
    """

    started_at_s: float
    e2e_s: float
    ttft_s: float | None = None
    itl_s: tuple[float, ...] = ()
    n_prompt_tokens: int | None = None
    n_output_tokens: int | None = None

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first: (e2e - ttft) / (n_out - 1)."""
        if self.ttft_s is None or self.n_output_tokens is None or self.n_output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.n_output_tokens - 1)


@dataclass(frozen=True)
class TokenLogprob:
    """One output token's logprob and the server's top-k alternatives (token -> logprob)."""

    token: str
    logprob: float | None
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class EngineResult:
    """A successful answer to ``requests[index]``.

    Wraps the task-facing ``Generation``/``Loglikelihoods`` with what the store and the
    speed/fidelity metrics need and ``Generation`` does not carry: timings, per-token
    logprobs, the raw reply (or the reassembled stream), attempts and engine metadata.
    """

    index: int
    request: Request
    response: Generation | Loglikelihoods
    timings: Timings
    attempts: int = 1
    token_logprobs: tuple[TokenLogprob, ...] | None = None
    raw: Mapping | None = None
    engine: Mapping = field(default_factory=dict)
    engagement: Engagement | None = None  # what the optimization did (None: unknown)


@dataclass(frozen=True)
class EngineFailure:
    """``requests[index]`` failed for good; ``error`` is the one-line reason."""

    index: int
    request: Request
    error: Exception
    attempts: int = 1


EngineOutcome = EngineResult | EngineFailure


@runtime_checkable
class Engine(Protocol):
    """What every engine (builtin, openai, vllm) offers the plan runner."""

    name: str

    def stream(self, requests: Sequence[Request]) -> AsyncIterator[EngineOutcome]:
        """Yield one outcome per request, in completion order."""
        ...

    async def aclose(self) -> None: ...


def request_label(request: Request) -> str:
    """How errors name a request: ``task/item_id``."""
    return f"{request.task}/{request.item_id}"


def iterate_blocking(engine: Engine, requests: Sequence[Request]) -> Iterator[EngineOutcome]:
    """Drive ``engine.stream`` on a private event loop in a worker thread and hand the
    outcomes to synchronous code (the plan runner, which writes SQLite) as they arrive.

    Stopping early (closing the generator) cancels the requests still in flight.
    """
    outcomes: queue.Queue = queue.Queue()
    done = object()
    loop = asyncio.new_event_loop()
    started = threading.Event()
    holder: list[asyncio.Task] = []

    async def pump() -> None:
        try:
            async for outcome in engine.stream(requests):
                outcomes.put(outcome)
        except asyncio.CancelledError:
            pass
        except BaseException as exc:  # handed to the consumer, which re-raises it
            outcomes.put(exc)
        finally:
            await engine.aclose()
            outcomes.put(done)

    def run() -> None:
        asyncio.set_event_loop(loop)
        holder.append(loop.create_task(pump()))
        started.set()
        loop.run_until_complete(holder[0])
        loop.close()

    worker = threading.Thread(target=run, name="engine-loop", daemon=True)
    worker.start()
    started.wait()
    finished = False
    try:
        while True:
            item = outcomes.get()
            if item is done:
                finished = True
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        if not finished:
            with contextlib.suppress(RuntimeError):  # RuntimeError: the loop already closed
                loop.call_soon_threadsafe(holder[0].cancel)
        worker.join(timeout=30)
