"""JSON round trips of requests, responses and token logprobs.

Python's json writes floats with ``repr`` and reads them back bit-exactly, so a stored
loglikelihood compares equal to the one the engine returned.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tasks.request import ChatMessage, Generation, GenerationParams, Loglikelihoods, Request
from validate.engines.base import Timings, TokenLogprob
from validate.store.errors import StoreError


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"),
                      allow_nan=True)


WITHHELD_TEXT = "[text withheld: not stored for this task; see prompt_sha256]"


def request_to_stored_dict(request: Request, store_text: bool) -> dict:
    """The request as stored. With ``store_text=False`` the prompt and message contents
    become a fixed placeholder; ``prompt_sha256`` (also a column) still identifies the
    real prompt, so pairing and "same prompt" checks keep working."""
    d = request.to_dict()
    if store_text:
        return d
    if d["prompt"] is not None:
        d["prompt"] = WITHHELD_TEXT
    if d["messages"] is not None:
        d["messages"] = [{**m, "content": WITHHELD_TEXT} for m in d["messages"]]
    d["text_withheld"] = True
    return d


def request_from_dict(d: Mapping) -> Request:
    """Rebuild a stored request. For a request stored with its text withheld, the prompt
    is the placeholder: use the stored ``prompt_sha256`` column, not this object's hash."""
    try:
        gen = d.get("gen")
        messages = d.get("messages")
        return Request(
            task=d["task"],
            item_id=d["item_id"],
            kind=d["kind"],
            prompt=d.get("prompt"),
            messages=None if messages is None else tuple(ChatMessage(**m) for m in messages),
            gen=None if gen is None else GenerationParams(**{**gen, "until": tuple(gen["until"])}),
            continuations=tuple(d.get("continuations") or ()),
        )
    except (KeyError, TypeError) as exc:
        raise StoreError(f"stored request is malformed: {exc}") from None


def response_to_dict(response: Generation | Loglikelihoods) -> dict:
    if isinstance(response, Generation):
        return {"type": "generation", "text": response.text,
                "finish_reason": response.finish_reason,
                "n_output_tokens": response.n_output_tokens}
    if isinstance(response, Loglikelihoods):
        return {"type": "loglikelihoods", "values": list(response.values),
                "is_greedy": list(response.is_greedy)}
    raise TypeError(f"not a response: {type(response).__name__}")


def response_from_dict(d: Mapping) -> Generation | Loglikelihoods:
    if d.get("type") == "generation":
        return Generation(text=d["text"], finish_reason=d.get("finish_reason"),
                          n_output_tokens=d.get("n_output_tokens"))
    if d.get("type") == "loglikelihoods":
        return Loglikelihoods(values=tuple(d["values"]), is_greedy=tuple(d.get("is_greedy", ())))
    raise StoreError(f"stored response has unknown type {d.get('type')!r}")


def logprobs_to_json(logprobs: tuple[TokenLogprob, ...] | None) -> str | None:
    if logprobs is None:
        return None
    return dumps([[t.token, t.logprob, [list(pair) for pair in t.top]] for t in logprobs])


def logprobs_from_json(text: str | None) -> tuple[TokenLogprob, ...] | None:
    if text is None:
        return None
    return tuple(TokenLogprob(token, lp, tuple((str(a), float(b)) for a, b in top))
                 for token, lp, top in json.loads(text))


def timings_from_row(started_at, e2e, ttft, itl_json, n_prompt, n_output) -> Timings | None:
    if e2e is None:
        return None
    return Timings(started_at_s=started_at, e2e_s=e2e, ttft_s=ttft,
                   itl_s=tuple(json.loads(itl_json or "[]")),
                   n_prompt_tokens=n_prompt, n_output_tokens=n_output)
