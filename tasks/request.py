"""The contract between tasks and engines: what a task asks for, what an engine answers.

A task renders each item into one ``Request``; an engine (builtin runtime, an
OpenAI-compatible server, vLLM) turns it into a ``Generation`` (free text) or
``Loglikelihoods`` (multiple choice); the task scores that. Everything here is a frozen
dataclass so requests can be hashed, stored and compared across runs.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Literal

RequestKind = Literal["generate", "loglikelihood"]


def sha256_text(text: str) -> str:
    """sha256 hex of UTF-8 text; for a text prompt it equals lm-eval's ``prompt_hash``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class GenerationParams:
    """Decoding parameters. ``max_gen_toks`` is always explicit: lm-eval's silent default
    of 256 truncates chain-of-thought, so every task sets and records its own."""

    max_gen_toks: int
    until: tuple[str, ...] = ()
    do_sample: bool = False
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["until"] = list(self.until)
        return d


@dataclass(frozen=True)
class ChatMessage:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class Request:
    """One model call for one item.

    Exactly one of ``prompt`` (completion style) or ``messages`` (chat style) is set.
    ``kind == "generate"`` needs ``gen``; ``kind == "loglikelihood"`` needs
    ``continuations`` (one per choice, with lm-eval's leading delimiter, e.g. " (A)").
    """

    task: str
    item_id: str
    kind: RequestKind
    prompt: str | None = None
    messages: tuple[ChatMessage, ...] | None = None
    gen: GenerationParams | None = None
    continuations: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError(f"request {self.task}/{self.item_id}: set exactly one of prompt, messages")
        if self.kind == "generate" and self.gen is None:
            raise ValueError(f"request {self.task}/{self.item_id}: a generate request needs gen")
        if self.kind == "loglikelihood" and not self.continuations:
            raise ValueError(f"request {self.task}/{self.item_id}: loglikelihood needs continuations")

    @property
    def prompt_sha256(self) -> str:
        """Identity of the model input. Text prompts hash like lm-eval's ``prompt_hash``;
        chat prompts hash their canonical JSON."""
        if self.prompt is not None:
            return sha256_text(self.prompt)
        canon = json.dumps([asdict(m) for m in self.messages or ()], ensure_ascii=False,
                           sort_keys=True, separators=(",", ":"))
        return sha256_text(canon)

    def to_dict(self) -> dict:
        return {
            "task": self.task,
            "item_id": self.item_id,
            "kind": self.kind,
            "prompt": self.prompt,
            "messages": None if self.messages is None else [asdict(m) for m in self.messages],
            "gen": None if self.gen is None else self.gen.to_dict(),
            "continuations": list(self.continuations),
            "prompt_sha256": self.prompt_sha256,
        }


@dataclass(frozen=True)
class Generation:
    """An engine's answer to a generate request. ``finish_reason`` is "stop" (a stop
    string or EOS) or "length" (hit ``max_gen_toks``): health checks count truncation."""

    text: str
    finish_reason: Literal["stop", "length"] | None = None
    n_output_tokens: int | None = None


@dataclass(frozen=True)
class Loglikelihoods:
    """An engine's answer to a loglikelihood request: log P(continuation | context) per
    choice, and whether each continuation is the greedy continuation."""

    values: tuple[float, ...]
    is_greedy: tuple[bool, ...] = ()


Response = Generation | Loglikelihoods
