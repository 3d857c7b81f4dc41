"""The FastAPI app: /health, /metrics, /v1/models, /v1/completions, /v1/chat/completions,
and vLLM's extra routes (``extra_routes``: /version, /ping, /tokenize, /detokenize,
/tokenizer_info, /v1/models/{id}). What the bodies accept is ``schemas``; how one HTTP
request becomes ``n`` choices of each of its prompts is ``choices``; docs/serve.md says it
all from a client's side.

``/metrics`` serves the model's own totals (``runtime.counters``) as Prometheus counters,
named like vLLM's where they mean the same: ``v41val:prefix_cache_hits_total`` (prompt
tokens taken from the prefix cache; a hit the SWA mode ignored is not one), and
``v41val:replayed_tokens_total``, ``v41val:trimmed_rows_total``, which vLLM does not
export. A client reads them before and after a pass (``validate.engines.prometheus``).

Every refusal is an OpenAI-style ``{"error": {"message", "type", "code"}}`` with a
one-line message naming the field: 400 for malformed JSON, bad values, fields that cannot
be honoured, prompts that do not fit the context (unknown fields are ignored with a
logged warning, as vLLM does); 404 for another model name or an unknown path,
405 for a wrong method, 413 for a body over the cap (``body_limit``). The app never
lets one bad request take the server down, nor fail its neighbours: errors are per
request. Tokenizing a prompt runs on a worker thread, so a multi-MB prompt does not
stall ``/health`` or other clients on the event loop.
"""

from __future__ import annotations

import asyncio
import json

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from runtime.engine.requests import GenerateRequest
from runtime.server import render
from runtime.server.body_limit import MAX_BODY_BYTES, BodyLimit
from runtime.server.chat_template import render_chat
from runtime.server.choices import expand, finish, merged, submit_all
from runtime.server.errors import ServerInputError
from runtime.server.extra_routes import add_extra_routes
from runtime.server.scheduler import Job, Scheduler
from runtime.server.schemas import ChatRequest, CompletionRequest


class ClientGone(Exception):
    """The client of a non-streaming request disconnected before its answer."""


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    flat = " ".join(str(message).split())
    return JSONResponse({"error": {"message": flat, "type": kind, "code": status}},
                        status_code=status)


def _validation_message(exc: RequestValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return "invalid request body"
    first = errors[0]
    if first.get("type") == "json_invalid":
        return f"invalid JSON body: {first.get('ctx', {}).get('error', first.get('msg'))}"
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first.get('msg')}{more}"


class _Served:
    """What the handlers share: scheduler, tokenizer, served model name."""

    def __init__(self, scheduler: Scheduler, tokenizer, model_name: str) -> None:
        self.scheduler = scheduler
        self.tokenizer = tokenizer
        self.model_name = model_name

    def check_model(self, name: str | None) -> None:
        if name is not None and name != self.model_name:
            raise LookupError(f"model {name!r} is not served here (this server serves "
                              f"{self.model_name!r})")

    def encode(self, text: str) -> tuple[int, ...]:
        """Text -> ids as vLLM's tokenizer does it: special-token strings in the text
        (``<|eos|>``) become their ids."""
        ids = tuple(self.tokenizer.encode(text, allow_special=True))
        if not ids:
            raise ServerInputError("the prompt encodes to no tokens")
        return ids

    def prompt_ids(self, prompt) -> tuple[int, ...]:
        """A prompt's ids: text is encoded (as the in-process engine does), a list of ids
        is taken as it is (the scheduler checks it against the vocabulary)."""
        return self.encode(prompt) if isinstance(prompt, str) else tuple(prompt)

    @property
    def vocab_size(self) -> int:
        return self.scheduler.engine.model.config.vocab_size


def _checked(body) -> None:
    """Refuse what cannot be honoured; log what is ignored."""
    reason = body.refusals()
    if reason:
        raise ServerInputError(reason)
    body.warn_ignored()


DISCONNECT_POLL_S = 0.25


async def _finish_unless_gone(jobs: list[Job], request: Request) -> list:
    """Every job's result, cancelling them all when the (non-streaming) client
    disconnects meanwhile, checked every ``DISCONNECT_POLL_S``: nobody waits for that
    answer, so the engine ends it at its next step instead of generating it to the end."""
    waiter = asyncio.ensure_future(asyncio.gather(*(finish(job) for job in jobs)))
    try:
        while True:
            done, _ = await asyncio.wait({waiter}, timeout=DISCONNECT_POLL_S)
            if done:
                return waiter.result()
            if await request.is_disconnected():
                raise ClientGone
    finally:
        if not waiter.done():
            waiter.cancel()
        for job in jobs:
            if not job.finished:
                job.cancel()


def _sse(obj) -> str:
    return f"data: {json.dumps(obj)}\n\n"


_METRICS = (("hit_tokens", "prefix_cache_hits", "Prompt tokens taken from the prefix cache."),
            ("prefix_hits", "prefix_cache_requests_hit", "Requests that took a prefix hit."),
            ("replayed_tokens", "replayed_tokens", "Cached tokens bounded replay fed again."),
            ("trimmed_rows", "trimmed_rows", "Prefill rows the decoder trim dropped."))


def _prometheus(snapshot: dict) -> str:
    """Prometheus text exposition of the model's counters."""
    lines = []
    for key, name, help_text in _METRICS:
        if key in snapshot:
            full = f"v41val:{name}_total"
            lines += [f"# HELP {full} {help_text}", f"# TYPE {full} counter",
                      f"{full} {float(snapshot[key])}"]
    return "\n".join(lines) + "\n"


def create_app(scheduler: Scheduler, tokenizer, model_name: str,
               max_body_bytes: int = MAX_BODY_BYTES) -> FastAPI:
    """The OpenAI-compatible app over ``scheduler``'s engine; request bodies larger
    than ``max_body_bytes`` are refused (413) before they are read in full."""
    served = _Served(scheduler, tokenizer, model_name)
    app = FastAPI(title="v41val serve", docs_url=None, redoc_url=None)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError):
        return _error(400, _validation_message(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException):  # 404, 405, ... in OpenAI's shape
        kind = {404: "not_found_error", 405: "invalid_request_error"}.get(exc.status_code,
                                                                          "invalid_request_error")
        return _error(exc.status_code, f"{exc.detail}", kind)

    @app.exception_handler(LookupError)
    async def _missing(_: Request, exc: LookupError):
        return _error(404, str(exc), "not_found_error")

    @app.exception_handler(ValueError)
    async def _bad(_: Request, exc: ValueError):
        return _error(400, str(exc))

    @app.exception_handler(Exception)
    async def _crash(_: Request, exc: Exception):
        return _error(500, f"{type(exc).__name__}: {exc}", "internal_error")

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.get("/metrics")
    async def metrics():
        counters = getattr(scheduler.engine.model, "counters", None)
        return PlainTextResponse(_prometheus(counters.snapshot() if counters else {}))

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{
            "id": model_name, "object": "model", "owned_by": "v41val",
            "max_model_len": scheduler.max_positions}]}

    @app.exception_handler(ClientGone)
    async def _gone(_: Request, exc: ClientGone):  # nobody reads it: 499, nginx's word
        return _error(499, "the client closed the connection before the answer")

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, request: Request):
        served.check_model(body.model)
        _checked(body)
        k = body.logprobs
        prompts = body.prompts
        ids = [await asyncio.to_thread(served.prompt_ids, p) for p in prompts]  # off the loop
        echoes = [p if isinstance(p, str) else tokenizer.decode(i)
                  for p, i in zip(prompts, ids, strict=True)]
        want_prompt = max((x for x in (k if body.echo else None, body.prompt_logprobs)
                           if x is not None), default=None)
        base = [_generate_request(served, body, i, body.max_tokens, k, want_prompt)
                for i in ids]
        jobs = submit_all(scheduler, expand(base, body.n, body.seed))
        if body.stream:
            return StreamingResponse(_stream_completion(served, jobs, body, echoes),
                                     media_type="text/event-stream")
        results = await _finish_unless_gone(jobs, request)
        choices = []
        for index, result in enumerate(results):
            echo = echoes[index // body.n] if body.echo else None
            choice = {"index": index, "text": (echo or "") + (result.text or ""),
                      "logprobs": None, "finish_reason": result.finish_reason,
                      "stop_reason": result.stop_reason}
            if k is not None:
                choice["logprobs"] = render.completion_logprobs(
                    tokenizer, result.prompt_ids, result.prompt_logprobs if body.echo else None,
                    result.token_ids, result.logprobs, echo, k)
            if body.prompt_logprobs is not None:
                choice["prompt_logprobs"] = render.prompt_logprobs(
                    tokenizer, result.prompt_ids, result.prompt_logprobs, body.prompt_logprobs)
            choices.append(choice)
        return {"id": render.new_id("cmpl"), "object": "text_completion",
                "created": render.now(), "model": model_name, "choices": choices,
                "usage": render.usage(results, body.n)}

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatRequest, request: Request):
        served.check_model(body.model)
        _checked(body)
        prompt = render_chat(((m.role, m.text(i)) for i, m in enumerate(body.messages)),
                             body.add_generation_prompt)
        ids = await asyncio.to_thread(served.encode, prompt)  # off the event loop
        k = (body.top_logprobs or 0) if body.logprobs else None
        base = _generate_request(served, body, ids, body.token_limit, k, body.prompt_logprobs)
        jobs = submit_all(scheduler, expand([base], body.n, body.seed))
        if body.stream:
            return StreamingResponse(_stream_chat(served, jobs, body),
                                     media_type="text/event-stream")
        results = await _finish_unless_gone(jobs, request)
        choices = []
        for index, result in enumerate(results):
            logprobs = None
            if k is not None:
                logprobs = {"content": [render.chat_logprob_entry(tokenizer, lp)
                                        for lp in result.logprobs or ()]}
            choices.append({"index": index, "message": {"role": "assistant",
                                                        "content": result.text or ""},
                            "logprobs": logprobs, "finish_reason": result.finish_reason,
                            "stop_reason": result.stop_reason})
        reply = {"id": render.new_id("chatcmpl"), "object": "chat.completion",
                 "created": render.now(), "model": model_name, "choices": choices,
                 "usage": render.usage(results, body.n)}
        if body.prompt_logprobs is not None:
            first = results[0]
            reply["prompt_logprobs"] = render.prompt_logprobs(
                tokenizer, first.prompt_ids, first.prompt_logprobs, body.prompt_logprobs)
        return reply

    add_extra_routes(app, served)
    return app


def _generate_request(served: _Served, body, ids, max_tokens, k, prompt_k) -> GenerateRequest:
    """The engine request of one prompt (seed set per choice by ``expand``)."""
    if max_tokens is None:  # vLLM: as many as the context leaves
        max_tokens = max(served.scheduler.max_positions - len(ids), 0)
    return GenerateRequest(
        prompt_ids=ids, max_tokens=max_tokens, stop=body.stops,
        stop_token_ids=tuple(body.stop_token_ids or ()), temperature=body.temperature,
        top_p=body.top_p, top_k=max(body.top_k, 0), min_p=body.min_p, logprobs=k, prompt_logprobs=prompt_k,
        ignore_eos=body.ignore_eos, logit_bias=body.bias_pairs(served.vocab_size),
        min_tokens=body.min_tokens, presence_penalty=body.presence_penalty,
        frequency_penalty=body.frequency_penalty, repetition_penalty=body.repetition_penalty,
        include_stop_str_in_output=body.include_stop_str_in_output)


def _error_chunk(exc) -> str:
    return _sse({"error": {"message": " ".join(str(exc).split()), "type": "internal_error"}})


async def _stream_completion(served: _Served, jobs: list[Job], body: CompletionRequest,
                             echoes: list[str]):
    tok, base = served.tokenizer, {"id": render.new_id("cmpl"), "object": "text_completion",
                                   "created": render.now(), "model": served.model_name}
    sent = [""] * len(jobs)
    results = [None] * len(jobs)
    # The echo goes first. With logprobs it carries the prompt's, known once the prefill is
    # done (the "prompt" event, or the result of a request that generates nothing).
    with_prompt_lps = body.echo and body.logprobs is not None
    echoed = [not body.echo] * len(jobs)

    def echo_chunk(index: int, prompt_ids=(), prompt_lps=None) -> str:
        echoed[index] = True
        text = echoes[index // body.n]
        logprobs = None if prompt_lps is None else render.completion_logprobs(
            tok, prompt_ids, prompt_lps, (), (), text, body.logprobs)
        return _sse({**base, "choices": [{"index": index, "text": text, "logprobs": logprobs,
                                          "finish_reason": None}]})

    if body.echo and not with_prompt_lps:
        for index in range(len(jobs)):
            yield echo_chunk(index)
    async for index, event in merged(jobs):
        if event[0] == "error":
            yield _error_chunk(event[1])
            break
        if event[0] == "prompt":
            if not echoed[index]:
                yield echo_chunk(index, event[1], event[2])
            continue
        if not echoed[index] and event[0] == "done":  # generated nothing: no prompt event
            result = event[1]
            yield echo_chunk(index, result.prompt_ids, result.prompt_logprobs)
        if event[0] == "token":
            _, token_id, safe, lp = event
            delta = (safe or "")[len(sent[index]):]
            logprobs = None
            if lp is not None:
                logprobs = render.completion_logprobs(tok, (), None, (token_id,), (lp,), None,
                                                      body.logprobs)
            if delta or logprobs:
                sent[index] += delta
                yield _sse({**base, "choices": [{"index": index, "text": delta,
                                                 "logprobs": logprobs, "finish_reason": None}]})
            continue
        result = results[index] = event[1]
        choice = {"index": index, "text": (result.text or "")[len(sent[index]):],
                  "logprobs": None, "finish_reason": result.finish_reason,
                  "stop_reason": result.stop_reason}
        if body.prompt_logprobs is not None:
            choice["prompt_logprobs"] = render.prompt_logprobs(
                tok, result.prompt_ids, result.prompt_logprobs, body.prompt_logprobs)
        yield _sse({**base, "choices": [choice]})
    else:
        if body.stream_options and body.stream_options.include_usage:
            yield _sse({**base, "choices": [], "usage": render.usage(results, body.n)})
    yield "data: [DONE]\n\n"


async def _stream_chat(served: _Served, jobs: list[Job], body: ChatRequest):
    tok, base = served.tokenizer, {"id": render.new_id("chatcmpl"),
                                   "object": "chat.completion.chunk",
                                   "created": render.now(), "model": served.model_name}
    for index in range(len(jobs)):
        yield _sse({**base, "choices": [{"index": index,
                                         "delta": {"role": "assistant", "content": ""},
                                         "logprobs": None, "finish_reason": None}]})
    sent = [""] * len(jobs)
    results = [None] * len(jobs)
    async for index, event in merged(jobs):
        if event[0] == "error":
            yield _error_chunk(event[1])
            break
        if event[0] == "prompt":  # prompt_logprobs come with the last chunk
            continue
        if event[0] == "token":
            _, _token_id, safe, lp = event
            delta = (safe or "")[len(sent[index]):]
            logprobs = None if lp is None else {"content": [render.chat_logprob_entry(tok, lp)]}
            if delta or logprobs:
                sent[index] += delta
                yield _sse({**base, "choices": [{"index": index, "delta": {"content": delta},
                                                 "logprobs": logprobs, "finish_reason": None}]})
            continue
        result = results[index] = event[1]
        yield _sse({**base, "choices": [{"index": index,
                                         "delta": {"content": (result.text or "")[
                                             len(sent[index]):]},
                                         "logprobs": None,
                                         "finish_reason": result.finish_reason,
                                         "stop_reason": result.stop_reason}]})
    else:
        if body.stream_options and body.stream_options.include_usage:
            yield _sse({**base, "choices": [], "usage": render.usage(results, body.n)})
    yield "data: [DONE]\n\n"
