"""Request bodies of the OpenAI-compatible API, lenient the way vLLM's are.

A field the server does not know is ignored and named in a logged warning (vLLM logs
"fields were present in the request but ignored"); a known field with a wrong type or an
out-of-range value is a 400 naming it (pydantic). Fields that vLLM knows but this
runtime cannot honour are accepted at their no-op value and refused with a 400 saying so
otherwise (``UNHONOURED``, checked by ``refusals``): silently ignoring a constraint
such as ``guided_json`` would return an answer that does not mean what was asked.

What is honoured, besides the OpenAI basics: ``n`` choices per prompt, several prompts in
one /completions request, token-id prompts (a list of ints, or a list of such lists),
``presence_penalty`` / ``frequency_penalty`` / ``repetition_penalty``, ``logit_bias``,
``min_tokens``, ``stop_token_ids``, ``include_stop_str_in_output``, ``prompt_logprobs``,
``top_k`` (0 or -1: off), ``min_p``, chat content as a list of text parts, role ``developer`` (a
system message), ``response_format: {"type": "text"}``.
"""

from __future__ import annotations

import logging
import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from runtime.seeds import SEED_LIMIT

MAX_TOP_LOGPROBS = 20
LOG = logging.getLogger("v41val.serve")


def _allows_none(annotation) -> bool:
    if annotation is Any or annotation is None:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return type(None) in typing.get_args(annotation)
    return False


class _Lenient(BaseModel):
    """Unknown fields are kept aside (``model_extra``), reported by ``ignored_fields``.
    An explicit ``null`` for a field that takes no None means its default (vLLM's fields
    are Optional: clients send ``"temperature": null``)."""

    model_config = ConfigDict(extra="allow")

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_defaults(cls, data):
        if isinstance(data, dict):
            fields = cls.model_fields
            data = {k: v for k, v in data.items()
                    if not (v is None and k in fields and not _allows_none(fields[k].annotation)
                            and not fields[k].is_required())}
        return data

    def ignored_fields(self, where: str = "") -> list[str]:
        out = [f"{where}{name}" for name in (self.model_extra or {})]
        for name in type(self).model_fields:
            value = getattr(self, name)
            items = value if isinstance(value, list) else [value]
            for k, item in enumerate(items):
                if isinstance(item, _Lenient):
                    at = f"{where}{name}[{k}]." if isinstance(value, list) else f"{where}{name}."
                    out += item.ignored_fields(at)
        return out

    def warn_ignored(self) -> None:
        ignored = self.ignored_fields()
        if ignored:
            LOG.warning("the following fields were present in the request but ignored: %s",
                        ", ".join(sorted(ignored)))


class StreamOptions(_Lenient):
    include_usage: bool = False


class ResponseFormat(_Lenient):
    type: str = "text"


def _is_default(value, default) -> bool:
    return value == default or (default is None and value in ({}, [], ""))


# field -> (its no-op value, why another value cannot be honoured)
UNHONOURED: dict[str, tuple[Any, str]] = {
    "use_beam_search": (False, "this server has no beam search"),
    "guided_json": (None, "this server has no guided decoding"),
    "guided_regex": (None, "this server has no guided decoding"),
    "guided_choice": (None, "this server has no guided decoding"),
    "guided_grammar": (None, "this server has no guided decoding"),
    "structured_outputs": (None, "this server has no guided decoding"),
    "bad_words": (None, "this runtime's sampler has no bad-words filter"),
    "allowed_token_ids": (None, "this runtime's sampler has no allowed-ids filter"),
    "truncate_prompt_tokens": (None, "prompts are never truncated here"),
    "skip_special_tokens": (True, "output text never contains special tokens here"),
    "logits_processors": (None, "this server runs no custom logits processors"),
}


class _Sampling(_Lenient):
    model: str | None = None
    temperature: float = Field(1.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=-1)  # 0 or -1 (vLLM's spelling): off
    seed: int | None = Field(None, ge=0, lt=SEED_LIMIT)  # checked here, not in a batch
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1)
    best_of: int | None = Field(None, ge=1)
    user: str | None = None
    ignore_eos: bool = False
    presence_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    frequency_penalty: float = Field(0.0, ge=-2.0, le=2.0)
    repetition_penalty: float = Field(1.0, gt=0.0)
    logit_bias: dict[str, float] | None = None
    min_tokens: int = Field(0, ge=0)
    include_stop_str_in_output: bool = False
    prompt_logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    response_format: ResponseFormat | None = None
    use_beam_search: bool = False
    min_p: float = Field(0.0, ge=0.0, le=1.0)
    guided_json: Any = None
    guided_regex: Any = None
    guided_choice: Any = None
    guided_grammar: Any = None
    structured_outputs: Any = None
    bad_words: Any = None
    allowed_token_ids: Any = None
    truncate_prompt_tokens: Any = None
    skip_special_tokens: bool = True
    logits_processors: Any = None

    @field_validator("stop")
    @classmethod
    def _stops(cls, value):
        stops = [value] if isinstance(value, str) else list(value or [])
        if any(not s for s in stops):
            raise ValueError("stop strings must be non-empty")
        return stops

    @property
    def stops(self) -> tuple[str, ...]:
        return tuple(self.stop or ())

    def refusals(self) -> str | None:
        """The first field whose value cannot be honoured, as a one-line reason."""
        for name, (default, why) in UNHONOURED.items():
            value = getattr(self, name, default)
            if not _is_default(value, default):
                return f"{name}: {value!r} cannot be honoured: {why}"
        if self.best_of is not None and self.best_of != self.n:
            return (f"best_of: {self.best_of} cannot be honoured (n = {self.n}): this server "
                    f"returns every sample it draws, so best_of must equal n or be omitted")
        kind = self.response_format.type if self.response_format else "text"
        if kind != "text":
            return (f"response_format: type {kind!r} cannot be honoured: this server has no "
                    f"guided decoding (only {{'type': 'text'}})")
        return None

    def bias_pairs(self, vocab_size: int) -> tuple[tuple[int, float], ...]:
        """``logit_bias`` as (token id, bias) pairs, biases clamped to [-100, 100] as
        vLLM does; a key that is not a token id of this vocabulary is a ValueError."""
        pairs = []
        for key, bias in (self.logit_bias or {}).items():
            try:
                token_id = int(key)
            except ValueError:
                raise ValueError(f"logit_bias: key {key!r} is not a token id") from None
            if not 0 <= token_id < vocab_size:
                raise ValueError(f"logit_bias: token id {token_id} is outside the vocabulary "
                                 f"[0, {vocab_size})")
            pairs.append((token_id, min(100.0, max(-100.0, float(bias)))))
        return tuple(pairs)


Prompt = str | list[str] | list[int] | list[list[int]]


class CompletionRequest(_Sampling):
    prompt: Prompt
    max_tokens: int | None = Field(16, ge=0)  # None: what the context leaves
    logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    echo: bool = False
    suffix: str | None = None
    add_special_tokens: bool = True  # this tokenizer adds none either way

    @field_validator("prompt")
    @classmethod
    def _prompts(cls, value):
        if isinstance(value, (str, list)) and len(value) == 0:
            raise ValueError("the prompt is empty")
        if isinstance(value, list) and any(isinstance(p, (str, list)) and len(p) == 0
                                           for p in value):
            raise ValueError("a prompt in the list is empty")
        return value

    @property
    def prompts(self) -> list[str | tuple[int, ...]]:
        """Each prompt: text, or a tuple of token ids."""
        p = self.prompt
        if isinstance(p, str):
            return [p]
        if all(isinstance(x, int) for x in p):
            return [tuple(p)]
        return [x if isinstance(x, str) else tuple(x) for x in p]

    def refusals(self) -> str | None:
        if self.suffix:
            return "suffix: cannot be honoured: this model has no fill-in-the-middle mode"
        return super().refusals()


class ContentPart(_Lenient):
    type: str
    text: str | None = None


class ChatMessage(_Lenient):
    role: str
    content: str | list[ContentPart] | None = None
    name: str | None = None

    def text(self, k: int) -> str:
        """The content as text; text parts are joined with newlines (as vLLM does)."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        texts = []
        for j, part in enumerate(self.content):
            if part.type != "text" or part.text is None:
                raise ValueError(f"messages[{k}].content[{j}]: a {part.type!r} part cannot be "
                                 f"honoured: this model reads text parts only")
            texts.append(part.text)
        return "\n".join(texts)


class ChatRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=0)
    max_completion_tokens: int | None = Field(None, ge=0)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    add_generation_prompt: bool = True
    tools: list | None = None
    tool_choice: Any = None
    chat_template: str | None = None
    echo: bool = False
    continue_final_message: bool = False

    @property
    def token_limit(self) -> int | None:
        """``max_completion_tokens``, else ``max_tokens``, else None: what the context
        leaves (vLLM's chat default; only completions default to 16)."""
        for value in (self.max_completion_tokens, self.max_tokens):
            if value is not None:
                return value
        return None

    def refusals(self) -> str | None:
        if self.tools and self.tool_choice not in (None, "none"):
            return "tools: cannot be honoured: this server has no tool calling"
        if self.chat_template is not None:
            return "chat_template: cannot be honoured: this server has one fixed template"
        if self.echo:
            return "echo: cannot be honoured for chat here"
        if self.continue_final_message:
            return "continue_final_message: cannot be honoured here"
        return super().refusals()
