"""The ``openai`` engine: any OpenAI-compatible server (vLLM, SGLang, ``v41val serve``).

Generate requests are streamed (SSE) so the client measures time to first token and the
gaps between output chunks; loglikelihood requests (multiple choice) are echo requests
to /completions, one per continuation, summed from the echoed prompt logprobs.
Results come back in completion order, each as soon as it exists.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import httpx

from tasks.request import Generation, Loglikelihoods, Request
from validate.engines.base import (
    EngineFailure,
    EngineOutcome,
    EngineResult,
    Timings,
    TokenLogprob,
    request_label,
)
from validate.engines.engagement import from_usage
from validate.engines.errors import (
    EngineError,
    EngineReplyMalformed,
    EngineUnavailable,
    EngineUnsupported,
)
from validate.engines.openai_config import OpenAIEngineConfig
from validate.engines.openai_http import HttpCaller, client_for, first_bytes
from validate.engines.openai_parse import (
    continuation_logprob,
    continuation_tokens,
    parse_reply,
)
from validate.engines.openai_payloads import echo_body, generate_body


@dataclass(frozen=True)
class TeacherForced:
    """Per-token logprobs (with top-k) of a given continuation under this endpoint."""

    request: Request
    tokens: tuple[TokenLogprob, ...]
    straddles_boundary: bool
    timings: Timings
    attempts: int


class OpenAIEngine:
    """Bounded-concurrency client of one OpenAI-compatible endpoint."""

    name = "openai"

    def __init__(self, config: OpenAIEngineConfig) -> None:
        self.config = config

    def metadata(self, endpoint: str) -> dict:
        c = self.config
        return {"engine": self.name, "base_url": c.base_url, "model": c.model,
                "endpoint": endpoint, "concurrency": c.concurrency, "stream": c.stream}

    async def aclose(self) -> None:
        """Nothing to release: every ``stream``/``complete`` call owns its client."""

    counters_source = "metrics"

    def read_counters(self) -> dict[str, float] | None:
        """The server's prefix-cache counters from ``metrics_url`` (None: no URL, or the
        server did not answer: unknown, not zero)."""
        from validate.engines.prometheus import prefix_cache_counters

        text = self._metrics_text()
        return None if text is None else prefix_cache_counters(text)

    def cache_config_info(self) -> list[dict[str, str]] | None:
        """The label sets of the server's ``cache_config_info`` gauge at ``metrics_url``
        (vLLM's resolved ``block_size``, ``enable_prefix_caching``, ...; one per engine);
        None: no URL or no answer; [] when the server exports no such gauge."""
        from validate.engines.prometheus import CACHE_CONFIG_INFO, info_labels

        text = self._metrics_text()
        return None if text is None else info_labels(text, CACHE_CONFIG_INFO)

    def _metrics_text(self) -> str | None:
        url = self.config.metrics_url
        if url is None:
            return None
        try:
            reply = httpx.get(url, timeout=self.config.connect_timeout_s)
            reply.raise_for_status()
        except httpx.HTTPError:
            return None
        return reply.text

    def server_report(self):
        """The server's own ``/version`` and ``/v1/models`` (``server_info``)."""
        from validate.engines.server_info import server_report

        c = self.config
        return server_report(c.base_url, timeout_s=c.connect_timeout_s, api_key=c.api_key)

    def server_metadata(self) -> dict:
        """What the run stores for this variant's endpoint."""
        c = self.config
        return {"engine": self.name, "base_url": c.base_url, "model": c.model,
                "server": self.server_report().to_dict(),
                "cache_config_info": self.cache_config_info()}

    async def complete(self, request: Request) -> EngineResult:
        """Answer one request (raises the engine errors instead of yielding failures)."""
        async with client_for(self.config) as client:
            return await self._answer(HttpCaller(self.config, client), 0, request)

    async def stream(self, requests: Sequence[Request]) -> AsyncIterator[EngineOutcome]:
        """Answer all ``requests``, yielding each outcome as it completes. A request that
        fails for good (4xx, malformed reply, retries exhausted) comes back as an
        ``EngineFailure``; closing the iterator early cancels the rest."""
        if not requests:
            return
        async with client_for(self.config) as client:
            caller = HttpCaller(self.config, client)
            finished: asyncio.Queue = asyncio.Queue()

            async def one(index: int, request: Request) -> None:
                try:
                    outcome: EngineOutcome | BaseException = await self._answer(
                        caller, index, request)
                except (EngineError, EngineUnavailable) as exc:
                    outcome = EngineFailure(index, request, exc,
                                            getattr(exc, "attempts", 1))
                except asyncio.CancelledError:
                    raise
                except BaseException as exc:  # a bug: re-raised by the consumer below
                    outcome = exc
                finished.put_nowait(outcome)

            tasks = [asyncio.create_task(one(i, r)) for i, r in enumerate(requests)]
            try:
                for _ in range(len(tasks)):
                    outcome = await finished.get()
                    if isinstance(outcome, BaseException):
                        raise outcome
                    yield outcome
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

    async def teacher_forced(self, request: Request, continuation: str,
                             top_k: int) -> TeacherForced:
        """The server's logprob and top-k alternatives for every token of
        ``continuation`` (e.g. the baseline's greedy output) after ``request.prompt``:
        the over-HTTP input of the top-k approximation of KL(base || variant)."""
        label = request_label(request)
        if request.prompt is None:
            raise EngineUnsupported(f"{label}: teacher forcing needs a text prompt; chat "
                                    f"endpoints do not echo prompt logprobs")
        async with client_for(self.config) as client:
            caller = HttpCaller(self.config, client)
            result = await caller.call(
                "/completions", echo_body(self.config, request.prompt + continuation, top_k),
                label, stream=False, chat=False)
        found = continuation_tokens(result.reply, request.prompt, continuation, label)
        return TeacherForced(request, found.tokens, found.straddles_boundary,
                             Timings(started_at_s=result.started_at_s, e2e_s=result.e2e_s,
                                     n_prompt_tokens=found.n_prompt_tokens, n_output_tokens=0),
                             result.attempts)

    async def _answer(self, caller: HttpCaller, index: int, request: Request) -> EngineResult:
        if request.kind == "loglikelihood":
            return await self._loglikelihood(caller, index, request)
        return await self._generate(caller, index, request)

    async def _generate(self, caller: HttpCaller, index: int, request: Request) -> EngineResult:
        label = request_label(request)
        path, body = generate_body(self.config, request)
        chat = request.messages is not None
        result = await caller.call(path, body, label, stream=self.config.stream, chat=chat)
        if result.stream is not None:
            acc = result.stream
            text, finish, usage = acc.text, acc.finish, acc.usage
            logprobs = tuple(acc.logprobs) if acc.saw_logprobs else None
            raw = {"id": acc.reply_id, "model": acc.model, "text": text,
                   "finish_reason": acc.raw_finish, "usage": dict(usage),
                   "n_chunks": acc.n_chunks}
            server_model = acc.model
        else:
            parsed = _parsed(result.reply, chat, label, self.config.root + path)
            text, finish, usage, logprobs = (parsed.text, parsed.finish_reason, parsed.usage,
                                             parsed.token_logprobs)
            raw = dict(result.reply)
            server_model = result.reply.get("model")
        n_output, source = _output_token_count(usage, logprobs, len(result.arrivals_s), text)
        arrivals = result.arrivals_s
        timings = Timings(
            started_at_s=result.started_at_s,
            e2e_s=result.e2e_s,
            ttft_s=arrivals[0] if arrivals else None,
            itl_s=tuple(b - a for a, b in zip(arrivals, arrivals[1:], strict=False)),
            n_prompt_tokens=usage.get("prompt_tokens"),
            n_output_tokens=n_output,
        )
        meta = {**self.metadata(path), "server_model": server_model,
                "n_output_tokens_from": source}
        return EngineResult(index, request, Generation(text, finish, n_output), timings,
                            result.attempts, logprobs, raw, meta,
                            engagement=from_usage([usage], self.config.reports_cached_tokens))

    async def _loglikelihood(self, caller: HttpCaller, index: int,
                             request: Request) -> EngineResult:
        label = request_label(request)
        if request.prompt is None:
            raise EngineUnsupported(f"{label}: loglikelihood needs a text prompt; chat "
                                    f"endpoints do not echo prompt logprobs")
        calls = [asyncio.ensure_future(caller.call("/completions", echo_body(self.config, request.prompt + cont),
                             f"{label} choice {k}", stream=False, chat=False))
                 for k, cont in enumerate(request.continuations)]
        try:
            results = await asyncio.gather(*calls)
        finally:  # one choice failed for good: do not leave its siblings running
            for call in calls:
                call.cancel()
        scores = [continuation_logprob(r.reply, request.prompt, cont, f"{label} choice {k}")
                  for k, (r, cont) in enumerate(zip(results, request.continuations, strict=True))]
        greedy = tuple(bool(s.is_greedy) for s in scores) \
            if all(s.is_greedy is not None for s in scores) else ()
        started = min(r.started_at_s for r in results)
        ended = max(r.started_at_s + r.e2e_s for r in results)
        timings = Timings(started_at_s=started, e2e_s=ended - started,
                          n_prompt_tokens=sum(s.n_prompt_tokens for s in scores),
                          n_output_tokens=0)
        meta = {**self.metadata("/completions"),
                "continuation_tokens": [s.n_tokens for s in scores],
                "boundary_straddles": [k for k, s in enumerate(scores) if s.straddles_boundary]}
        raw = {"choices": [dict(r.reply) for r in results]}
        usages = [r.reply.get("usage") for r in results]
        return EngineResult(index, request,
                            Loglikelihoods(tuple(s.logprob for s in scores), greedy), timings,
                            max(r.attempts for r in results), None, raw, meta,
                            engagement=from_usage(usages, self.config.reports_cached_tokens))


def _parsed(reply, chat: bool, label: str, url: str):
    """``parse_reply``, its error carrying the request and the start of the reply."""
    try:
        return parse_reply(reply, chat, label)
    except EngineReplyMalformed as exc:
        raise EngineReplyMalformed(f"{exc} (POST {url}, HTTP 200: "
                                   f"{first_bytes(json.dumps(reply))})") from None


def _output_token_count(usage, logprobs, n_pieces: int, text: str) -> tuple[int | None, str]:
    """Output tokens, from the best source the server gave: usage, then one logprob
    entry per token, then one stream chunk per token (vLLM sends one token per chunk)."""
    if isinstance(usage.get("completion_tokens"), int):
        return usage["completion_tokens"], "usage"
    if logprobs is not None:
        return len(logprobs), "logprobs"
    if n_pieces:
        return n_pieces, "stream_chunks"
    return (0, "empty") if not text else (None, "unknown")
