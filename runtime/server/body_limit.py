"""A cap on request body size, as plain ASGI middleware (in front of FastAPI's parsing).

A body larger than the cap is refused with 413 in the OpenAI error shape: at once when
``content-length`` says so, else as soon as the bytes read pass the cap (a chunked
upload), so a multi-MB prompt never reaches JSON parsing or the tokenizer. The cap's
default, 16 MiB, holds a prompt of the flash model's full context at several bytes per
token."""

from __future__ import annotations

import json

MAX_BODY_BYTES = 16 * 2**20


class BodyLimit:
    def __init__(self, app, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def message(self, size: int) -> str:
        return (f"request body of {size:,}+ bytes is over this server's limit of "
                f"{self.max_bytes:,} bytes")

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or ()).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._refuse(send, int(length))
            return
        seen = 0

        async def limited_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:  # FastAPI re-raises an HTTPException from here,
                    # and the app's handler answers it in the OpenAI shape
                    from fastapi import HTTPException

                    raise HTTPException(413, self.message(seen))
            return message

        await self.app(scope, limited_receive, send)

    async def _refuse(self, send, size: int) -> None:
        body = json.dumps({"error": {"message": self.message(size),
                                     "type": "invalid_request_error", "code": 413}}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
