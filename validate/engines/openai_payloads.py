"""Request bodies for /completions and /chat/completions, built from a ``Request``."""

from __future__ import annotations

from dataclasses import asdict

from tasks.request import GenerationParams, Request
from validate.engines.openai_config import OpenAIEngineConfig


def _sampling(gen: GenerationParams) -> dict:
    body: dict = {"max_tokens": gen.max_gen_toks,
                  "temperature": gen.temperature if gen.do_sample else 0.0}
    if gen.do_sample:
        body["top_p"] = gen.top_p
    if gen.until:
        body["stop"] = list(gen.until)
    if gen.seed is not None:
        body["seed"] = gen.seed
    return body


def generate_body(config: OpenAIEngineConfig, request: Request) -> tuple[str, dict]:
    """(endpoint path, JSON body) of a generate request."""
    assert request.gen is not None
    body: dict = {"model": config.model, **_sampling(request.gen)}
    if request.prompt is not None:
        path = "/completions"
        body["prompt"] = request.prompt
        if config.top_logprobs is not None:
            body["logprobs"] = config.top_logprobs
    else:
        path = "/chat/completions"
        body["messages"] = [asdict(m) for m in request.messages or ()]
        if config.top_logprobs is not None:
            body["logprobs"] = True
            body["top_logprobs"] = config.top_logprobs
    if config.stream:
        body["stream"] = True
        if config.stream_usage:
            body["stream_options"] = {"include_usage": True}
    body.update(config.extra_body)
    return path, body


def echo_body(config: OpenAIEngineConfig, text: str, top_k: int = 1) -> dict:
    """Score ``text`` (context + continuation) token by token: the server echoes the
    prompt with each prompt token's logprob, its top-k alternatives and its text offset."""
    return {"model": config.model, "prompt": text, "max_tokens": config.loglikelihood_max_tokens,
            "temperature": 0.0, "logprobs": top_k, "echo": True, **config.extra_body}
