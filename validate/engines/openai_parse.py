"""Reading OpenAI-API replies: whole replies, stream chunks, echoed prompt logprobs.

Every missing or mistyped field is an ``EngineReplyMalformed`` naming the request and the
field path (``choices[0].logprobs.text_offset``), so a server that drifts from the API is
diagnosed in one line instead of a KeyError deep in the statistics.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from validate.engines.base import TokenLogprob
from validate.engines.errors import EngineReplyMalformed

_FINISH = {"stop": "stop", "eos": "stop", "stop_sequence": "stop", "end_turn": "stop",
           "length": "length", "max_tokens": "length"}


def get(obj: Any, path: str, label: str, kind: type | tuple[type, ...] | None = None) -> Any:
    """``obj`` at a dotted path with ``[i]`` indices; a malformed-reply error if absent."""
    here: Any = obj
    walked = ""
    for part in path.replace("[", ".[").split("."):
        if not part:
            continue
        walked = f"{walked}{part}" if part.startswith("[") else (
            f"{walked}.{part}" if walked else part)
        try:
            here = here[int(part[1:-1])] if part.startswith("[") else here[part]
        except (KeyError, IndexError, TypeError, ValueError):
            raise EngineReplyMalformed(f"{label}: server reply has no field {walked}") from None
    if kind is not None and not isinstance(here, kind):
        raise EngineReplyMalformed(f"{label}: server reply field {walked} is "
                                   f"{type(here).__name__}, expected "
                                   f"{getattr(kind, '__name__', kind)}")
    return here


def finish_reason(value: Any) -> str | None:
    return None if value is None else _FINISH.get(str(value))


def _top_pairs(top: Any) -> tuple[tuple[str, float], ...]:
    if isinstance(top, Mapping):
        return tuple((str(t), float(lp)) for t, lp in top.items())
    if isinstance(top, list):  # chat style: [{"token": ..., "logprob": ...}]
        return tuple((str(e["token"]), float(e["logprob"])) for e in top)
    return ()


def completion_logprobs(logprobs: Any, label: str, where: str) -> tuple[TokenLogprob, ...]:
    """Token logprobs of a /completions choice (parallel lists ``tokens``,
    ``token_logprobs``, ``top_logprobs``)."""
    tokens = get(logprobs, "tokens", label, list)
    values = get(logprobs, "token_logprobs", label, list)
    tops = logprobs.get("top_logprobs") or [None] * len(tokens)
    if not (len(tokens) == len(values) == len(tops)):
        raise EngineReplyMalformed(f"{label}: {where}.logprobs lists have different lengths "
                                   f"({len(tokens)}, {len(values)}, {len(tops)})")
    return tuple(TokenLogprob(str(t), None if v is None else float(v), _top_pairs(top))
                 for t, v, top in zip(tokens, values, tops, strict=True))


def chat_logprobs(logprobs: Any, label: str, where: str) -> tuple[TokenLogprob, ...]:
    """Token logprobs of a /chat/completions choice (``content: [{token, logprob,
    top_logprobs}]``)."""
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    if content is None:
        content = []
    if not isinstance(content, list):
        raise EngineReplyMalformed(f"{label}: {where}.logprobs.content is not a list")
    try:
        return tuple(TokenLogprob(str(e["token"]), float(e["logprob"]),
                                  _top_pairs(e.get("top_logprobs")))
                     for e in content)
    except (KeyError, TypeError, ValueError) as exc:
        raise EngineReplyMalformed(f"{label}: {where}.logprobs.content entry lacks {exc}") from None


@dataclass(frozen=True)
class ParsedReply:
    text: str
    finish_reason: str | None
    usage: Mapping
    token_logprobs: tuple[TokenLogprob, ...] | None


def parse_reply(reply: Any, chat: bool, label: str) -> ParsedReply:
    """A whole (non-streamed) reply."""
    choice = get(reply, "choices[0]", label, dict)
    if chat:
        text = get(choice, "message.content", label)
        text = "" if text is None else text
        logprobs = chat_logprobs(choice["logprobs"], label, "choices[0]") \
            if choice.get("logprobs") is not None else None
    else:
        text = get(choice, "text", label, str)
        logprobs = completion_logprobs(choice["logprobs"], label, "choices[0]") \
            if choice.get("logprobs") is not None else None
    if not isinstance(text, str):
        raise EngineReplyMalformed(f"{label}: server reply field choices[0] text is not a string")
    usage = reply.get("usage") if isinstance(reply.get("usage"), Mapping) else {}
    return ParsedReply(text, finish_reason(choice.get("finish_reason")), usage, logprobs)


@dataclass
class StreamAccumulator:
    """Collects a streamed reply chunk by chunk, with the arrival time of every chunk
    that carried output text (TTFT is the first, inter-token latencies the gaps)."""

    chat: bool
    label: str
    pieces: list[str] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)
    saw_logprobs: bool = False
    finish: str | None = None
    raw_finish: Any = None
    usage: Mapping = field(default_factory=dict)
    n_chunks: int = 0
    reply_id: Any = None
    model: Any = None

    def feed(self, chunk: Any, arrived_at: float) -> None:
        self.n_chunks += 1
        where = f"stream chunk {self.n_chunks}"
        if not isinstance(chunk, Mapping):
            raise EngineReplyMalformed(f"{self.label}: {where} is not a JSON object")
        self.reply_id = chunk.get("id", self.reply_id)
        self.model = chunk.get("model", self.model)
        if isinstance(chunk.get("usage"), Mapping):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        if choices is None:
            raise EngineReplyMalformed(f"{self.label}: {where} has no field choices")
        if not choices:  # the usage-only chunk at the end
            return
        choice = get(choices, "[0]", self.label, dict)
        if self.chat:
            delta = choice.get("delta") or {}
            text = delta.get("content") or ""
            if choice.get("logprobs") is not None:
                self.saw_logprobs = True
                self.logprobs.extend(chat_logprobs(choice["logprobs"], self.label, where))
        else:
            text = choice.get("text")
            if text is None:
                raise EngineReplyMalformed(f"{self.label}: {where} has no field choices[0].text")
            if choice.get("logprobs") is not None:
                self.saw_logprobs = True
                self.logprobs.extend(completion_logprobs(choice["logprobs"], self.label, where))
        if not isinstance(text, str):
            raise EngineReplyMalformed(f"{self.label}: {where} text is not a string")
        if text:
            self.pieces.append(text)
            self.arrivals.append(arrived_at)
        if choice.get("finish_reason") is not None:
            self.raw_finish = choice["finish_reason"]
            self.finish = finish_reason(choice["finish_reason"])

    @property
    def text(self) -> str:
        return "".join(self.pieces)


@dataclass(frozen=True)
class ContinuationTokens:
    """The echoed tokens of a continuation, each with its logprob and top-k."""

    tokens: tuple[TokenLogprob, ...]
    straddles_boundary: bool
    n_prompt_tokens: int


@dataclass(frozen=True)
class ContinuationScore:
    logprob: float
    is_greedy: bool | None
    n_tokens: int
    straddles_boundary: bool
    n_prompt_tokens: int


def continuation_tokens(reply: Any, context: str, continuation: str,
                        label: str) -> ContinuationTokens:
    """The continuation's tokens from an echo reply to ``context + continuation``.

    lm-eval tokenizes context and continuation itself and so knows where the
    continuation starts; over HTTP with a text prompt only the server tokenizes, so the
    boundary comes from the echoed ``text_offset``s: token i spans [offset[i],
    offset[i+1]). The continuation is the tokens from the first one that ends past
    ``len(context)`` up to the last one that starts before the end of the prompt (later
    tokens were generated, not echoed). A token that straddles the boundary (the
    tokenizer merged the context's end with the continuation's start) is counted and
    reported. As in lm-eval, trailing whitespace of the context belongs to the
    continuation.
    """
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
    if not context:
        raise EngineReplyMalformed(f"{label}: loglikelihood needs a non-empty context")
    lp = get(reply, "choices[0].logprobs", label, dict)
    offsets = get(lp, "text_offset", label, list)
    tokens = completion_logprobs(lp, label, "choices[0]")
    if len(offsets) != len(tokens):
        raise EngineReplyMalformed(f"{label}: choices[0].logprobs.text_offset has {len(offsets)} "
                                   f"entries for {len(tokens)} tokens")
    ctx_end, prompt_end = len(context), len(context) + len(continuation)
    ends = [*offsets[1:], math.inf]
    start = sum(1 for end in ends if end <= ctx_end)
    stop = sum(1 for off in offsets if off < prompt_end)
    if start >= stop:
        raise EngineReplyMalformed(f"{label}: echoed text_offsets show no continuation tokens "
                                   f"(did the server echo the prompt?)")
    chosen = tokens[start:stop]
    if any(t.logprob is None for t in chosen):
        raise EngineReplyMalformed(f"{label}: choices[0].logprobs.token_logprobs is null inside "
                                   f"the continuation")
    usage = reply.get("usage") if isinstance(reply.get("usage"), Mapping) else {}
    return ContinuationTokens(chosen, offsets[start] < ctx_end,
                              int(usage.get("prompt_tokens", stop)))


def continuation_logprob(reply: Any, context: str, continuation: str,
                         label: str) -> ContinuationScore:
    """log P(continuation | context) as lm-eval's local-completions computes it: the sum
    of the continuation tokens' logprobs; greedy when each token is its position's top-1
    (see ``continuation_tokens`` for where the continuation starts)."""
    found = continuation_tokens(reply, context, continuation, label)
    chosen = found.tokens
    if all(t.top for t in chosen):
        greedy: bool | None = all(t.logprob >= max(v for _, v in t.top) for t in chosen)
    else:
        greedy = None
    return ContinuationScore(
        logprob=float(sum(t.logprob for t in chosen)),
        is_greedy=greedy,
        n_tokens=len(chosen),
        straddles_boundary=found.straddles_boundary,
        n_prompt_tokens=found.n_prompt_tokens,
    )
