"""What a caller asks the engine for, and what it gets back."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runtime.engine.errors import EngineError


@dataclass(frozen=True)
class GenerateRequest:
    """One generation request.

    Give the prompt as ``prompt_ids`` or as ``prompt`` text (the engine's tokenizer
    encodes it). ``temperature == 0`` is greedy; otherwise tokens are drawn with a
    per-request generator seeded by ``seed`` (or the engine's seed plus the request's
    position in the call), so a request's tokens do not depend on what else is batched.

    ``stop`` strings end generation on the decoded text and are cut from ``text``
    (like OpenAI/vLLM); ``stop_token_ids`` (plus the tokenizer's EOS unless
    ``ignore_eos``) end it on a token. ``logprobs=k`` returns the chosen token's logprob
    and the top-k for every generated token; ``prompt_logprobs=k`` does the same for the
    prompt (the first prompt token has none); such requests bypass the prefix cache
    and are never decoder-trimmed, because every prompt row's logits are needed.
    ``return_logits`` returns the full float32 logits of every generated step (and of
    the prompt, with ``prompt_logprobs``).

    ``min_p`` drops, before top-k and top-p, every token less likely than ``min_p``
    times the most likely one (vLLM's min-p; 0 = off; greedy is unchanged).
    ``logit_bias`` ((token id, bias) pairs), ``min_tokens``, ``presence_penalty``,
    ``frequency_penalty`` and ``repetition_penalty`` change the logits a token is chosen
    from (``runtime.engine.penalties``; 0 / 1.0 are no-ops), never the reported logprobs.
    ``include_stop_str_in_output`` keeps a hit stop string at the end of ``text``.
    """

    prompt: str | None = None
    prompt_ids: tuple[int, ...] | None = None
    max_tokens: int = 16
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    return_logits: bool = False
    request_id: str | None = None
    logit_bias: tuple[tuple[int, float], ...] = ()
    min_tokens: int = 0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    include_stop_str_in_output: bool = False

    def __post_init__(self) -> None:
        if self.prompt_ids is not None:
            object.__setattr__(self, "prompt_ids", tuple(int(t) for t in self.prompt_ids))
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "stop_token_ids", tuple(int(t) for t in self.stop_token_ids))
        if (self.prompt is None) == (self.prompt_ids is None):
            raise EngineError("GenerateRequest: give exactly one of prompt (text) or prompt_ids")
        if self.prompt_ids is not None and len(self.prompt_ids) == 0:
            raise EngineError("GenerateRequest.prompt_ids: the prompt is empty")
        if self.max_tokens < 0:
            raise EngineError(f"GenerateRequest.max_tokens: expected >= 0, got {self.max_tokens}")
        if self.temperature < 0:
            raise EngineError(f"GenerateRequest.temperature: expected >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise EngineError(f"GenerateRequest.top_p: expected in (0, 1], got {self.top_p}")
        if not 0 <= self.min_p <= 1:
            raise EngineError(f"GenerateRequest.min_p: expected in [0, 1] (0 = off), got {self.min_p}")
        if self.top_k < 0:
            raise EngineError(f"GenerateRequest.top_k: expected >= 0 (0 = off), got {self.top_k}")
        for name in ("logprobs", "prompt_logprobs"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise EngineError(f"GenerateRequest.{name}: expected >= 0 or None, got {value}")
        if any(not s for s in self.stop):
            raise EngineError("GenerateRequest.stop: stop strings must be non-empty")
        object.__setattr__(self, "logit_bias",
                           tuple((int(t), float(b)) for t, b in self.logit_bias))
        if not 0 <= self.min_tokens <= max(self.max_tokens, 0):
            raise EngineError(f"GenerateRequest.min_tokens: expected in [0, max_tokens = "
                              f"{self.max_tokens}], got {self.min_tokens}")
        if not self.repetition_penalty > 0:
            raise EngineError(f"GenerateRequest.repetition_penalty: expected > 0 (1.0 = off), "
                              f"got {self.repetition_penalty}")


@dataclass(frozen=True)
class TokenLogprob:
    """A token's logprob under the model's (untempered) distribution, plus the top-k;
    ``rank``: 1 + the number of tokens strictly more likely (1 = the argmax)."""

    token_id: int
    logprob: float
    top_ids: tuple[int, ...] = ()
    top_logprobs: tuple[float, ...] = ()
    rank: int | None = None

    @property
    def is_greedy(self) -> bool:
        """True when the token is the argmax (needs ``top_ids`` with k >= 1)."""
        return bool(self.top_ids) and self.top_ids[0] == self.token_id


@dataclass(frozen=True)
class RequestTimings:
    """Per-request timings in seconds, measured from the start of ``generate``.

    ``ttft_s`` is the time to the first generated token; ``token_latencies_s`` the gaps
    between consecutive generated tokens (the first entry is the second token's gap).
    """

    queued_s: float
    ttft_s: float | None
    total_s: float
    token_latencies_s: tuple[float, ...]
    prompt_tokens: int
    prefix_hit_tokens: int
    prefill_tokens_fed: int

    @property
    def tpot_s(self) -> float | None:
        """Mean time per output token after the first."""
        if not self.token_latencies_s:
            return None
        return sum(self.token_latencies_s) / len(self.token_latencies_s)


@dataclass(frozen=True)
class RequestEngagement:
    """What the model did to one request's prompt (the engagement ledger's source).

    ``hit_tokens``: prompt tokens taken from a prefix-cache snapshot (0: cold, or a hit
    the SWA mode ignored); ``replayed_tokens``: of those, the ones bounded replay fed
    again; ``trimmed_chunks`` / ``trimmed_rows``: prefill chunks whose layers from
    ``trim_layer`` on ran on fewer rows, and how many rows they dropped (``trim_layer``
    is None when nothing was trimmed).
    """

    prompt_tokens: int
    hit_tokens: int
    replayed_tokens: int
    trimmed_chunks: int
    trimmed_rows: int
    trim_layer: int | None


@dataclass(frozen=True)
class GenerateResult:
    request_id: str
    prompt_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    text: str | None
    finish_reason: str  # "stop" | "length"
    stop_reason: str | int | None  # the stop string or stop token id that ended it
    logprobs: tuple[TokenLogprob, ...] | None
    prompt_logprobs: tuple[TokenLogprob | None, ...] | None
    logits: torch.Tensor | None  # [n_generated, vocab] float32
    prompt_logits: torch.Tensor | None  # [n_prompt, vocab] float32 (row i predicts i+1)
    timings: RequestTimings
    engagement: RequestEngagement | None = None
