"""Runs the runtime engine on a worker thread and feeds HTTP handlers as tokens appear.

Handlers submit a ``GenerateRequest`` and read events from an asyncio queue: for a
request with prompt logprobs ``("prompt", prompt_ids, prompt_logprobs)`` once its
prefill is done, one ``("token", token_id, safe_text, logprob)`` per chosen token, then
``("done", result)`` or ``("error", exception)``. The worker takes every waiting request (up to
``max_batch``) into one ``generate`` call, so concurrent clients are decoded together;
requests that arrive while a batch runs wait for the next one (waves, not continuous
admission across HTTP requests). Requests are checked before they are queued, so one
bad request cannot fail a batch; if a batch fails anyway, the requests that have not
streamed a token yet are run again one by one, so only the one that fails alone gets
the error, and the worker keeps serving. A job whose client disconnected is marked
``cancelled``: the engine ends it at its next step (``ObservedEngine``'s ``cancelled``
hook) while its neighbours go on, and a cancelled job still queued is skipped.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from dataclasses import dataclass, field

from runtime.engine.requests import GenerateRequest
from runtime.seeds import check_seed
from runtime.server.errors import ContextLengthError, ServerInputError
from runtime.server.observed import ObservedEngine


@dataclass
class Job:
    request: GenerateRequest
    loop: asyncio.AbstractEventLoop
    events: asyncio.Queue = field(default_factory=asyncio.Queue)
    cancelled: bool = False  # the client left: the worker ends it at its next step
    tokens_sent: int = 0
    finished: bool = False

    def send(self, *event) -> None:
        if event[0] == "token":
            self.tokens_sent += 1
        elif event[0] in ("done", "error"):
            self.finished = True
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.events.put_nowait, event)

    def cancel(self) -> None:
        self.cancelled = True


class _Dispatch:
    def __init__(self, jobs: list[Job]) -> None:
        self.jobs = jobs

    def on_prompt(self, index, prompt_ids, prompt_logprobs) -> None:
        self.jobs[index].send("prompt", prompt_ids, prompt_logprobs)

    def on_token(self, index, token_id, safe_text, logprob) -> None:
        self.jobs[index].send("token", token_id, safe_text, logprob)

    def on_finish(self, index, result) -> None:
        self.jobs[index].send("done", result)

    def cancelled(self) -> set[int]:
        return {i for i, job in enumerate(self.jobs) if job.cancelled}


class Scheduler:
    """One worker thread around one ``ObservedEngine``."""

    def __init__(self, engine: ObservedEngine, max_batch: int = 8) -> None:
        self.engine = engine
        self.max_batch = max_batch
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    @property
    def max_positions(self) -> int:
        return self.engine.model.config.max_position_embeddings

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="v41val-serve", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=30)
            self._thread = None

    def check(self, request: GenerateRequest) -> None:
        """Refuse, before queueing, what would fail inside a batch (and so fail every
        request batched with it)."""
        if request.seed is not None:
            try:
                check_seed(request.seed, "seed")
            except ValueError as exc:
                raise ServerInputError(str(exc)) from None
        ids = request.prompt_ids or ()
        vocab = self.engine.model.config.vocab_size
        bad = [t for t in ids if not 0 <= t < vocab]
        if bad:
            raise ServerInputError(f"prompt token {bad[0]} is outside the vocabulary [0, {vocab})")
        need = len(ids) + request.max_tokens
        if need > self.max_positions:
            raise ContextLengthError(
                f"this model's maximum context length is {self.max_positions} tokens; the "
                f"request needs {len(ids)} prompt + {request.max_tokens} output tokens")

    def submit(self, request: GenerateRequest) -> Job:
        self.check(request)
        self.start()
        job = Job(request, asyncio.get_running_loop())
        self._queue.put(job)
        return job

    def _work(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            jobs = [first]
            while len(jobs) < self.max_batch:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._queue.put(None)
                    break
                jobs.append(more)
            self._run(jobs)

    def _run(self, jobs: list[Job]) -> None:
        """One batch; if it fails anyway (a check missed something), each request that
        has no token out yet is run again alone, so only the one that fails alone gets
        the error; a request already streaming cannot restart and gets it too."""
        jobs = [j for j in jobs if not j.cancelled]
        if not jobs:
            return
        try:
            self.engine.generate_observed([j.request for j in jobs], _Dispatch(jobs))
        except Exception as exc:  # noqa: BLE001 - reported to the requests it concerns
            if len(jobs) == 1:
                jobs[0].send("error", exc)
                return
            for job in jobs:
                if job.finished:
                    continue
                if job.tokens_sent:
                    job.send("error", exc)
                else:
                    self._run([job])
