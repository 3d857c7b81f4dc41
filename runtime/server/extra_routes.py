"""vLLM's routes beside the OpenAI API: ``/version``, ``/ping``, ``/tokenize``,
``/detokenize``, ``/tokenizer_info`` and ``/v1/models/{id}``.

``/tokenize`` encodes exactly as the completion routes do (a prompt, or chat messages
through the chat template), so the ids a client counts are the ids the server feeds;
special-token strings in text become their ids, as in vLLM (a client that decodes
sampled ids without skipping specials, like ``vllm bench serve``'s random prompts, gets
the same count back), and ``add_special_tokens`` changes nothing because this tokenizer
adds no BOS/EOS. ``/detokenize`` decodes as completions decode (special tokens skipped).
``/tokenizer_info`` carries what lm-eval's remote tokenizer reads (``eos_token``,
``bos_token``, ``pad_token``, ``chat_template``: the Jinja twin of the chat template)
plus the special ids themselves, the tokenizer's type and vocabulary size.
"""

from __future__ import annotations

import asyncio
import importlib.metadata

from fastapi import FastAPI, Response
from pydantic import Field

from runtime.server import render
from runtime.server.chat_template import JINJA_TEMPLATE, render_chat
from runtime.server.errors import ServerInputError
from runtime.server.schemas import ChatMessage, _Lenient


def _version() -> str:
    try:
        return importlib.metadata.version("v41val")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class TokenizeRequest(_Lenient):
    model: str | None = None
    prompt: str | None = None
    messages: list[ChatMessage] | None = None
    add_generation_prompt: bool = True
    add_special_tokens: bool = True
    return_token_strs: bool = False


class DetokenizeRequest(_Lenient):
    model: str | None = None
    tokens: list[int] = Field(min_length=0)


def _special(tokenizer, name: str):
    """(text, id) of the tokenizer's ``<|name|>`` special, or (None, None)."""
    try:
        token_id = getattr(tokenizer, f"{name}_id")
    except Exception:  # noqa: BLE001 - a tokenizer without that special
        return None, None
    return tokenizer.special_text(token_id), token_id


def tokenizer_info(tokenizer, max_len: int) -> dict:
    info = {"tokenizer_class": type(tokenizer).__name__,
            "vocab_size": tokenizer.vocab_size, "model_max_length": max_len,
            "add_bos_token": False, "add_eos_token": False, "chat_template": JINJA_TEMPLATE}
    for name in ("bos", "eos", "pad"):
        text, token_id = _special(tokenizer, name)
        info[f"{name}_token"], info[f"{name}_token_id"] = text, token_id
    return info


def add_extra_routes(app: FastAPI, served) -> None:
    tokenizer = served.tokenizer

    @app.get("/version")
    async def version():
        return {"version": _version()}

    @app.api_route("/ping", methods=["GET", "POST"])
    async def ping():
        return Response(status_code=200)

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str):
        served.check_model(model_id)
        return {"id": served.model_name, "object": "model", "owned_by": "v41val",
                "max_model_len": served.scheduler.max_positions}

    @app.get("/tokenizer_info")
    async def info():
        return tokenizer_info(tokenizer, served.scheduler.max_positions)

    @app.post("/tokenize")
    async def tokenize(body: TokenizeRequest):
        served.check_model(body.model)
        body.warn_ignored()
        if (body.prompt is None) == (body.messages is None):
            raise ServerInputError("tokenize: give exactly one of prompt or messages")
        text = body.prompt
        if body.messages is not None:
            text = render_chat(((m.role, m.text(i)) for i, m in enumerate(body.messages)),
                               body.add_generation_prompt)
        ids = await asyncio.to_thread(lambda: list(tokenizer.encode(text, allow_special=True)))
        return {"count": len(ids), "max_model_len": served.scheduler.max_positions,
                "tokens": ids,
                "token_strs": [render.token_text(tokenizer, t) for t in ids]
                if body.return_token_strs else None}

    @app.post("/detokenize")
    async def detokenize(body: DetokenizeRequest):
        served.check_model(body.model)
        body.warn_ignored()
        vocab = served.vocab_size
        bad = [t for t in body.tokens if not 0 <= t < vocab]
        if bad:
            raise ServerInputError(f"tokens: id {bad[0]} is outside the vocabulary [0, {vocab})")
        return {"prompt": tokenizer.decode(body.tokens)}
