"""An ``Engine`` that reports each token and each finished request as it happens.

The runtime ``Engine.generate`` returns when every request is done; a server that
streams (SSE) and a client that stores each response the moment it exists need to hear
about tokens and completions earlier. ``ObservedEngine`` keeps the engine's scheduling
and numbers untouched and only calls ``observer`` from the places where a step starts,
a token is chosen and a request is finished. ``on_step`` is optional: an observer that
has it may raise there to abandon the batch between two model steps (a client that
stopped listening; a prefill-only batch chooses no token, so ``on_token`` alone could
not stop it). ``cancelled`` is optional too: the indices of requests to end now (finish
reason ``abort``) while the rest of the batch goes on (a streaming client that
disconnected must not hold its neighbours or the queue). ``on_prompt`` is optional: a
request that asked for prompt logprobs has them all once its prefill is done, and the
observer hears them then, just before the first token (a stream that echoes the prompt
with its logprobs sends them first, as vLLM does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from runtime.engine.engine import Engine
from runtime.engine.requests import GenerateRequest, GenerateResult


class Observer(Protocol):
    def on_token(self, index: int, token_id: int, safe_text: str | None, logprob) -> None:
        """Request ``index`` produced ``token_id``; ``safe_text`` is its output text so
        far that no stop string can still take back (None without a tokenizer);
        ``logprob`` the token's ``TokenLogprob`` when the request asked for logprobs."""

    def on_finish(self, index: int, result: GenerateResult) -> None:
        """Request ``index`` finished with ``result``."""


@dataclass
class NullObserver:
    def on_token(self, index: int, token_id: int, safe_text: str | None, logprob) -> None:
        return None

    def on_finish(self, index: int, result: GenerateResult) -> None:
        return None


def safe_text(matcher) -> str:
    """Text that is final: cut at a hit stop string, else minus the tail a stop string
    could still complete (its longest length - 1 characters)."""
    if matcher.hit_at is not None:
        return matcher.output_text()
    hold = max((len(s) for s in matcher.stops), default=1) - 1
    return matcher.text[: len(matcher.text) - hold] if hold else matcher.text


class ObservedEngine(Engine):
    """``Engine`` plus an observer called per chosen token and per finished request."""

    def generate_observed(self, requests: Sequence[GenerateRequest],
                          observer: Observer) -> list[GenerateResult]:
        self._observer = observer
        try:
            return self.generate(list(requests))
        finally:
            self._observer = NullObserver()

    def _step(self, active, t0):  # noqa: D401 - engine hook
        observer = getattr(self, "_observer", None)
        on_step = getattr(observer, "on_step", None)
        if on_step is not None:
            on_step()
        cancelled = getattr(observer, "cancelled", None)
        if cancelled is not None:  # requests whose client left end here, alone
            gone = cancelled()
            for live in active:
                if live.index in gone and live.finish_reason is None:
                    live.finish_reason = "abort"
            active = [live for live in active if live.finish_reason is None]
            if not active:
                return
        super()._step(active, t0)

    def _choose(self, live, row, now_s):  # noqa: D401 - engine hook
        super()._choose(live, row, now_s)
        observer = getattr(self, "_observer", None)
        on_prompt = getattr(observer, "on_prompt", None)
        if on_prompt is not None and len(live.tokens) == 1 and \
                live.request.prompt_logprobs is not None:
            on_prompt(live.index, tuple(live.prompt), tuple(live.prompt_logprobs))
        if observer is not None:
            text = safe_text(live.matcher) if live.detok is not None else None
            logprob = live.logprobs[-1] if live.request.logprobs is not None else None
            observer.on_token(live.index, live.tokens[-1], text, logprob)

    def _result(self, live, now_s):
        result = super()._result(live, now_s)
        observer = getattr(self, "_observer", None)
        if observer is not None:
            observer.on_finish(live.index, result)
        return result
