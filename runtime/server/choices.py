"""One HTTP request, many engine requests: ``n`` choices of each prompt.

Choice ``index = prompt_index * n + j`` (vLLM's numbering). Seeds follow vLLM's parallel
sampling: with ``seed = s``, choice j of each prompt is drawn with seed ``s + j``, so
choice 0 is the answer the same request with ``n = 1`` gets and a repeated request gets
the same choices; without a seed, every sampled choice gets its own fresh random seed from
the server (not reproducible, as in vLLM), so choices are independent even when they land
in different batches. Every engine request is checked before any is queued: one bad
prompt refuses the whole HTTP request and runs none of it.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace

from runtime.engine.requests import GenerateRequest
from runtime.seeds import SEED_LIMIT
from runtime.server.errors import ServerInputError
from runtime.server.scheduler import Job, Scheduler

_SEEDS = random.SystemRandom()


def choice_seeds(seed: int | None, n: int, sampled: bool) -> list[int | None]:
    """The seed of each of ``n`` choices (see the module doc)."""
    if seed is not None:
        if seed + n - 1 >= SEED_LIMIT:
            raise ServerInputError(f"seed: with n = {n}, choices use seeds {seed}..{seed + n - 1}"
                                   f", which must stay below 2**63")
        return [seed + j for j in range(n)]
    return [_SEEDS.randrange(SEED_LIMIT) if sampled else None for _ in range(n)]


def expand(base: Sequence[GenerateRequest], n: int, seed: int | None) -> list[GenerateRequest]:
    """Each prompt's request ``n`` times, with the choices' seeds."""
    out = []
    for request in base:
        for s in choice_seeds(seed, n, request.temperature > 0):
            out.append(replace(request, seed=s))
    return out


def submit_all(scheduler: Scheduler, requests: Sequence[GenerateRequest]) -> list[Job]:
    for request in requests:  # all checked first: nothing runs if one is refused
        scheduler.check(request)
    return [scheduler.submit(r) for r in requests]


async def finish(job: Job):
    """Drain a job's events: its result, or raise its error."""
    while True:
        event = await job.events.get()
        if event[0] == "done":
            return event[1]
        if event[0] == "error":
            raise event[1]


async def events(job: Job) -> AsyncIterator[tuple]:
    """A streamed job's events; when the consumer goes away the job is cancelled, so the
    engine stops generating it at its next step instead of holding the batch."""
    try:
        while True:
            event = await job.events.get()
            yield event
            if event[0] in ("done", "error"):
                return
    finally:
        if not job.finished:
            job.cancel()


async def merged(jobs: Sequence[Job]) -> AsyncIterator[tuple[int, tuple]]:
    """(choice index, event) of all ``jobs`` as they happen; closing it (a client that
    disconnected) cancels every job not finished."""
    queue: asyncio.Queue = asyncio.Queue()

    async def pump(index: int, job: Job) -> None:
        async for event in events(job):
            await queue.put((index, event))

    tasks = [asyncio.ensure_future(pump(i, job)) for i, job in enumerate(jobs)]
    try:
        left = len(jobs)
        while left:
            index, event = await queue.get()
            yield index, event
            if event[0] in ("done", "error"):
                left -= 1
    finally:
        for task in tasks:
            task.cancel()
        for job in jobs:
            if not job.finished:
                job.cancel()
