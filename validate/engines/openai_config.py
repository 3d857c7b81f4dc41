"""Configuration of the OpenAI-compatible engine (one frozen dataclass)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from validate.engines.errors import EngineError


@dataclass(frozen=True)
class OpenAIEngineConfig:
    """How to reach and drive an OpenAI-compatible server.

    ``base_url`` ends before the endpoint (``http://127.0.0.1:8000/v1``). Requests with a
    text prompt go to ``/completions``, requests with chat messages to
    ``/chat/completions``. ``concurrency`` bounds the HTTP calls in flight (the operating
    point reported beside every speed figure). Retries: ``max_attempts`` in all, waiting
    ``min(backoff_max_s, backoff_base_s * 2**(attempt-1))`` times a jitter in [0.5, 1).
    ``top_logprobs`` asks for the top-k alternatives of every output token (None: none).
    ``loglikelihood_max_tokens`` is the ``max_tokens`` of echo requests: 1 like lm-eval
    (some servers refuse 0); the generated token is dropped from the sum.
    ``timeout_s`` bounds each wait for bytes (httpx's read timeout), not a whole reply:
    a long generation that keeps streaming never times out, a server that stalls does.
    ``reports_cached_tokens``: the server puts ``usage.prompt_tokens_details.cached_tokens``
    in every reply whose prompt hit its prefix cache and omits it otherwise (vLLM with
    ``--enable-prompt-tokens-details``), so an absent field means 0; False: absent
    means unknown (``validate.engines.engagement``). ``metrics_url``: the server's
    Prometheus endpoint, read before and after each variant's quality pass for its
    prefix-cache counters (None: not read).
    """

    base_url: str
    model: str
    concurrency: int = 8
    stream: bool = True
    stream_usage: bool = True
    timeout_s: float = 600.0
    connect_timeout_s: float = 10.0
    max_attempts: int = 5
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    jitter_seed: int | None = None
    top_logprobs: int | None = None
    loglikelihood_max_tokens: int = 1
    api_key: str | None = None
    extra_body: Mapping = field(default_factory=dict)
    reports_cached_tokens: bool = False
    metrics_url: str | None = None

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise EngineError(f"openai engine: base_url {self.base_url!r} must start with "
                              "http:// or https://")
        if self.concurrency < 1:
            raise EngineError(f"openai engine: concurrency must be >= 1, got {self.concurrency}")
        if self.max_attempts < 1:
            raise EngineError(f"openai engine: max_attempts must be >= 1, got {self.max_attempts}")
        if self.top_logprobs is not None and self.top_logprobs < 0:
            raise EngineError(f"openai engine: top_logprobs must be >= 0, got {self.top_logprobs}")
        if self.metrics_url is not None and not self.metrics_url.startswith(
                ("http://", "https://")):
            raise EngineError(f"openai engine: metrics_url {self.metrics_url!r} must start "
                              "with http:// or https://")
        for name in ("timeout_s", "connect_timeout_s"):  # not x > 0 also refuses NaN
            if not getattr(self, name) > 0:
                raise EngineError(f"openai engine: {name} must be > 0 seconds, got "
                                  f"{getattr(self, name)}")
        for name in ("backoff_base_s", "backoff_max_s"):
            if not getattr(self, name) >= 0:
                raise EngineError(f"openai engine: {name} must be >= 0 seconds, got "
                                  f"{getattr(self, name)}")
        if self.loglikelihood_max_tokens < 0:
            raise EngineError("openai engine: loglikelihood_max_tokens must be >= 0")

    @property
    def root(self) -> str:
        return self.base_url.rstrip("/")
