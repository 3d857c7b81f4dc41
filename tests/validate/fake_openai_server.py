"""A small but real OpenAI-compatible server for the engine tests (it has no tests).

Served by uvicorn on 127.0.0.1 and an ephemeral port in a background thread. It
tokenizes text into words with their leading whitespace, gives every token a logprob
that is a fixed function of (token, position), generates deterministic text from a hash
of the prompt, streams one token per SSE chunk, and misbehaves on purpose when the
prompt contains a marker:

    FAIL500xN / FAIL503xN   the first N calls with this prompt answer 500 / 503
    SLOWxN                  the first N calls sleep past the client's timeout
    BAD400                  every call answers 400 with an OpenAI-style error message
    BADJSON                 200 with a body that is not JSON
    NOCHOICES               200 with a JSON object that lacks "choices"
    CUTxN                   the first N streams stop after two tokens without [DONE]
    BADSTREAM               a stream whose second chunk is not JSON

It counts calls per prompt, replies sent in full per prompt, and the requests in flight
(and their maximum).

Like vLLM with prefix caching and ``--enable-prompt-tokens-details``, it keeps a cache
of whole blocks of ``CACHE_BLOCK`` prompt tokens (chained: a block is a hit only when
every block before it is), reports a prompt's hit as
``usage.prompt_tokens_details.cached_tokens`` and leaves ``prompt_tokens_details`` out
when the hit is 0; ``/metrics`` serves the totals as vLLM's Prometheus counters
``vllm:prefix_cache_queries_total`` / ``vllm:prefix_cache_hits_total`` (tokens).
``state.cached`` records each prompt's hits in order. Like vLLM it answers ``/version``
and lists its model with ``owned_by`` and ``max_model_len`` (``state.version`` None: a
404 for ``/version``; ``state.owned_by``: who it says it is).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

from validate.engines.loopback import LoopbackServer

TOKEN_DELAY_S = 0.02
CACHE_BLOCK = 4
SLOW_S = 2.0


def tokenize(text: str) -> list[str]:
    """Words with their leading whitespace; trailing whitespace is its own token."""
    return re.findall(r"\s*\S+|\s+$", text)


def _h(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:12], 16)


def token_logprob(token: str, position: int) -> float:
    return -(_h(f"{token}@{position}") % 1000) / 100.0 - 0.01


def alternative(token: str, position: int) -> tuple[str, float]:
    """The other entry of the top-2: better than the token at odd hashes."""
    lp = token_logprob(token, position)
    return ("<alt>", lp + 0.5) if _h(f"alt{token}@{position}") % 2 else ("<alt>", lp - 0.5)


def generated_tokens(prompt_key: str, max_tokens: int, ignore_eos: bool = False) -> list[str]:
    """6-10 tokens (at most ``max_tokens``); exactly ``max_tokens`` with vLLM's ``ignore_eos``."""
    h = _h(prompt_key)
    n = max_tokens if ignore_eos else min(max_tokens, 6 + h % 5)
    return [f" t{(h >> i) % 97}" for i in range(n)]


VERSION, MAX_MODEL_LEN = "0.32.0+fake", 4096


@dataclass
class ServerState:
    calls: dict[str, int] = field(default_factory=dict)
    answered: dict[str, int] = field(default_factory=dict)  # replies sent in full, per prompt
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    blocks: set = field(default_factory=set)  # cached prompt prefixes (whole blocks)
    cached: dict[str, list[int]] = field(default_factory=dict)  # prompt -> hit per call
    queries: int = 0  # prompt tokens looked up, as vLLM counts them
    hits: int = 0  # of those, found in the cache
    version: str | None = VERSION  # GET /version; None: 404, as an older server
    owned_by: str = "vllm"  # GET /v1/models, as vLLM says who serves

    def look_up(self, prompt: str, tokens: list[str]) -> int:
        """The cached prefix of ``tokens`` in whole blocks (at most len - 1 tokens, so
        one is always computed), then cache every whole block of it."""
        with self.lock:
            hit = 0
            while (hit + CACHE_BLOCK <= len(tokens) - 1
                   and tuple(tokens[:hit + CACHE_BLOCK]) in self.blocks):
                hit += CACHE_BLOCK
            for end in range(CACHE_BLOCK, len(tokens) + 1, CACHE_BLOCK):
                self.blocks.add(tuple(tokens[:end]))
            self.queries += len(tokens)
            self.hits += hit
            self.cached.setdefault(prompt, []).append(hit)
            return hit

    def enter(self) -> None:
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def leave(self) -> None:
        with self.lock:
            self.in_flight -= 1

    def count(self, key: str) -> int:
        with self.lock:
            self.calls[key] = self.calls.get(key, 0) + 1
            return self.calls[key]

    def answer(self, key: str) -> None:
        with self.lock:
            self.answered[key] = self.answered.get(key, 0) + 1

    def reset(self) -> None:
        with self.lock:
            self.calls.clear()
            self.answered.clear()
            self.max_in_flight = 0
            self.blocks.clear()
            self.cached.clear()
            self.queries = self.hits = 0
            self.version, self.owned_by = VERSION, "vllm"


def _logprob_block(tokens: list[str], start_pos: int, offsets: list[int], first_none: bool,
                   top: bool) -> dict:
    lps, tops = [], []
    for k, tok in enumerate(tokens):
        pos = start_pos + k
        if first_none and pos == 0:
            lps.append(None)
            tops.append(None)
            continue
        lps.append(token_logprob(tok, pos))
        alt, alt_lp = alternative(tok, pos)
        tops.append({tok: token_logprob(tok, pos), alt: alt_lp} if top else None)
    return {"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets}


def _chat_logprobs(tokens: list[str], start_pos: int) -> dict:
    return {"content": [{"token": tok, "logprob": token_logprob(tok, start_pos + k),
                         "top_logprobs": [{"token": tok, "logprob": token_logprob(tok, start_pos + k)},
                                          dict(zip(("token", "logprob"),
                                                   alternative(tok, start_pos + k), strict=True))]}
                        for k, tok in enumerate(tokens)]}


def build_app(state: ServerState, ready: threading.Event) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI):
        ready.set()
        yield

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict:
        return {"ok": True}

    @app.get("/version")
    async def version():
        if state.version is None:
            return JSONResponse({"detail": "Not Found"}, 404)
        return {"version": state.version}

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": "fake-model", "object": "model",
                                            "owned_by": state.owned_by, "root": "/models/fake",
                                            "parent": None, "max_model_len": MAX_MODEL_LEN}]}

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        with state.lock:
            queries, hits = state.queries, state.hits
        label = 'model_name="fake-model",engine="0"'
        return PlainTextResponse(
            "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in tokens.\n"
            "# TYPE vllm:prefix_cache_queries_total counter\n"
            f"vllm:prefix_cache_queries_total{{{label}}} {float(queries)}\n"
            "# HELP vllm:prefix_cache_hits_total Prefix cache hits, in tokens.\n"
            "# TYPE vllm:prefix_cache_hits_total counter\n"
            f"vllm:prefix_cache_hits_total{{{label}}} {float(hits)}\n"
            "vllm:num_requests_running{model_name=\"fake-model\"} 0.0\n"
            "# TYPE vllm:cache_config_info gauge\n"
            f'vllm:cache_config_info{{block_size="{CACHE_BLOCK}",enable_prefix_caching="True",'
            'engine="0"} 1.0\n')

    async def misbehave(prompt_key: str):
        n = state.count(prompt_key)
        for code in (500, 503):
            m = re.search(rf"FAIL{code}x(\d+)", prompt_key)
            if m and n <= int(m.group(1)):
                return JSONResponse({"error": {"message": f"injected {code} #{n}"}}, code)
        m = re.search(r"SLOWx(\d+)", prompt_key)
        if m and n <= int(m.group(1)):
            # the client gives up at its timeout: from then on this is not its request in
            # flight, so stop counting it before sleeping past the timeout
            state.leave()
            await asyncio.sleep(SLOW_S)
            return "gone"  # nobody is listening any more
        if "BAD400" in prompt_key:
            return JSONResponse({"error": {"message": "prompt contains the forbidden\nword "
                                                      "BAD400", "type": "invalid_request_error"}},
                                400)
        if "BADJSON" in prompt_key:
            return PlainTextResponse("{not json", 200)
        if "NOCHOICES" in prompt_key:
            return JSONResponse({"id": "cmpl-x", "object": "text_completion"})
        return None

    async def serve(body: dict, chat: bool):
        if chat:
            prompt = "".join(f"<{m['role']}>{m['content']}" for m in body["messages"])
        else:
            prompt = body["prompt"]
        state.enter()
        streaming = False
        try:
            bad = await misbehave(prompt)
            if isinstance(bad, str):
                streaming = True  # already left: do not count it out twice
                return PlainTextResponse(bad, 504)
            if bad is not None:
                return bad
            prompt_tokens = tokenize(prompt)
            out = generated_tokens(prompt, int(body.get("max_tokens", 16)),
                                   ignore_eos=bool(body.get("ignore_eos")))
            finish = "length" if len(out) == int(body.get("max_tokens", 16)) else "stop"
            want_lp = body.get("logprobs")
            usage = {"prompt_tokens": len(prompt_tokens), "completion_tokens": len(out),
                     "total_tokens": len(prompt_tokens) + len(out)}
            hit = state.look_up(prompt, prompt_tokens)
            if hit:  # vLLM omits the details when nothing was cached
                usage["prompt_tokens_details"] = {"cached_tokens": hit}
            if body.get("stream"):
                streaming = True
                return StreamingResponse(
                    stream(prompt, prompt_tokens, out, finish, usage, chat, want_lp, body),
                    media_type="text/event-stream")
            reply = whole(prompt, prompt_tokens, out, finish, usage, chat, want_lp, body)
            state.answer(prompt)
            return JSONResponse(reply)
        finally:
            if not streaming:
                state.leave()

    def whole(prompt, prompt_tokens, out, finish, usage, chat, want_lp, body) -> dict:
        text = "".join(out)
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text},
                      "finish_reason": finish,
                      "logprobs": _chat_logprobs(out, len(prompt_tokens)) if want_lp else None}
            return {"id": "chat-1", "object": "chat.completion", "model": body["model"],
                    "choices": [choice], "usage": usage}
        tokens = (prompt_tokens if body.get("echo") else []) + out
        base = prompt if body.get("echo") else ""
        offsets, pos = [], len(prompt) if not body.get("echo") else 0
        for tok in tokens:
            offsets.append(pos)
            pos += len(tok)
        lp = None
        if want_lp is not None:
            start = 0 if body.get("echo") else len(prompt_tokens)
            lp = _logprob_block(tokens, start, offsets, first_none=bool(body.get("echo")),
                                top=int(want_lp) > 0)
        choice = {"index": 0, "text": base + text, "logprobs": lp, "finish_reason": finish}
        return {"id": "cmpl-1", "object": "text_completion", "model": body["model"],
                "choices": [choice], "usage": usage}

    async def stream(prompt, prompt_tokens, out, finish, usage, chat, want_lp, body):
        cut = re.search(r"CUTx(\d+)", prompt)
        cut_now = cut is not None and state.calls[prompt] <= int(cut.group(1))
        try:
            offset = len(prompt)
            if chat:  # like vLLM: a first chunk with the role and no text
                role = {"index": 0, "delta": {"role": "assistant", "content": ""},
                        "finish_reason": None}
                yield f"data: {json.dumps({'id': 's-1', 'choices': [role]})}\n\n"
            for k, tok in enumerate(out):
                if k:
                    await asyncio.sleep(TOKEN_DELAY_S)  # the "model" computing the next token
                if k == 1 and "BADSTREAM" in prompt:
                    yield "data: {oops\n\n"
                if k == 2 and cut_now:
                    return
                last = k == len(out) - 1
                pos = len(prompt_tokens) + k
                if chat:
                    choice = {"index": 0, "delta": {"content": tok},
                              "logprobs": _chat_logprobs([tok], pos) if want_lp else None,
                              "finish_reason": finish if last else None}
                else:
                    lp = (_logprob_block([tok], pos, [offset], False, int(want_lp) > 0)
                          if want_lp is not None else None)
                    choice = {"index": 0, "text": tok, "logprobs": lp,
                              "finish_reason": finish if last else None}
                offset += len(tok)
                yield f"data: {json.dumps({'id': 's-1', 'model': body['model'], 'choices': [choice]})}\n\n"
            if (body.get("stream_options") or {}).get("include_usage"):
                yield f"data: {json.dumps({'id': 's-1', 'choices': [], 'usage': usage})}\n\n"
        finally:
            # before [DONE]: the client may start its next request the moment it reads it
            state.leave()
        if not cut_now:
            state.answer(prompt)
            yield "data: [DONE]\n\n"

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await serve(await request.json(), chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await serve(await request.json(), chat=True)

    return app


class FakeServer(LoopbackServer):
    """The app on 127.0.0.1:<ephemeral> in a daemon thread until ``stop``; ``state``
    is what the app saw and does."""

    def __init__(self) -> None:
        self.state = ServerState()
        self.ready = threading.Event()
        super().__init__(build_app(self.state, self.ready), name="fake server")
