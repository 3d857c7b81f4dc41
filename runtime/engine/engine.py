"""Engine: generation for many requests over one ``V41Model``.

Each step packs one chunk per active request into a single ``model.forward`` call:
prefilling requests contribute their next prompt chunk (at most
``prefill_chunk_tokens``, boundaries at absolute multiples of it, plus one at the last
whole prefix-cache block of the prompt so that block can be cached), decoding requests
contribute their last sampled token. The model advances each request's state; the
engine chooses tokens, applies stop rules, gathers logprobs and timings, and keeps the
prefix cache. Everything about *how* a prefix is reused (exact continuation, or
bounded replay of the last window) is the model's: the engine hands it a snapshot and
feeds the prompt from ``state.num_computed`` on.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

import torch

from runtime.engine import penalties, sampling
from runtime.engine.errors import EngineError
from runtime.engine.prefix_cache import PrefixCache
from runtime.engine.requests import (
    GenerateRequest,
    GenerateResult,
    RequestEngagement,
    RequestTimings,
    TokenLogprob,
)
from runtime.engine.stops import StopMatcher
from runtime.scheduling import EngineConfig

__all__ = ["Engine", "EngineConfig"]


@dataclass
class _Live:
    """Mutable bookkeeping of one request in flight."""

    index: int
    request: GenerateRequest
    request_id: str
    prompt: list[int]
    state: object
    generator: torch.Generator
    stop_ids: frozenset[int]
    matcher: StopMatcher
    detok: object | None
    admitted_s: float
    hit_tokens: int = 0
    fed_prompt_tokens: int = 0
    tokens: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)
    prompt_logprobs: list[TokenLogprob | None] = field(default_factory=list)
    logits: list[torch.Tensor] = field(default_factory=list)
    prompt_logits: list[torch.Tensor] = field(default_factory=list)
    token_times: list[float] = field(default_factory=list)
    finish_reason: str | None = None
    stop_reason: str | int | None = None

    @property
    def prefilling(self) -> bool:
        return self.state.num_computed < len(self.prompt)


class Engine:
    """Batched generation over ``model.forward(list[SeqChunk])`` (see the module doc)."""

    def __init__(self, model, tokenizer=None, config: EngineConfig | None = None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.config = config or EngineConfig()
        self.prefix_cache = PrefixCache(self.config.prefix_block_tokens, self.config.prefix_cache_entries)
        self._chunk_cls = _seq_chunk_class()

    # ------------------------------------------------------------------ public API
    def generate(self, requests: list[GenerateRequest]) -> list[GenerateResult]:
        """Run ``requests`` to completion; results come back in the same order."""
        t0 = time.perf_counter()
        waiting = deque(enumerate(requests))
        prepared = {i: self._prompt_ids(r, i) for i, r in waiting}
        active: list[_Live] = []
        results: dict[int, GenerateResult] = {}
        with torch.inference_mode():
            while waiting or active:
                while waiting and len(active) < self.config.max_batch_requests:
                    i, req = waiting.popleft()
                    active.append(self._admit(i, req, prepared[i], time.perf_counter() - t0))
                self._step(active, t0)
                for live in [x for x in active if x.finish_reason is not None]:
                    active.remove(live)
                    results[live.index] = self._result(live, time.perf_counter() - t0)
        return [results[i] for i in range(len(requests))]

    def generate_one(self, request: GenerateRequest) -> GenerateResult:
        return self.generate([request])[0]

    # ------------------------------------------------------------------ admission
    def _prompt_ids(self, req: GenerateRequest, index: int) -> list[int]:
        if req.prompt_ids is not None:
            ids = list(req.prompt_ids)
        else:
            if self.tokenizer is None:
                raise EngineError(f"request {index}: a text prompt needs an engine tokenizer")
            ids = list(self.tokenizer.encode(req.prompt))
            if not ids:
                raise EngineError(f"request {index}: the prompt encodes to no tokens")
        vocab = self.model.config.vocab_size
        for pos, t in enumerate(ids):
            if not 0 <= t < vocab:
                raise EngineError(f"request {index}: prompt token {t} at position {pos} is outside [0, {vocab})")
        if req.stop and self.tokenizer is None:
            raise EngineError(f"request {index}: stop strings need an engine tokenizer")
        return ids

    def _admit(self, index: int, req: GenerateRequest, prompt: list[int], now_s: float) -> _Live:
        hit = None
        if req.prompt_logprobs is None:
            hit = self.prefix_cache.lookup(prompt, max_tokens=len(prompt) - 1)
        state = self.model.new_state(hit.snapshot if hit is not None else None)
        stop_ids = set(req.stop_token_ids)
        if self.tokenizer is not None and not req.ignore_eos:
            eos = getattr(self.tokenizer, "eos_id", None)
            if eos is not None:
                stop_ids.add(eos)
        seed = req.seed if req.seed is not None else self.config.seed + index
        live = _Live(
            index=index,
            request=req,
            request_id=req.request_id or f"req-{index}",
            prompt=prompt,
            state=state,
            generator=sampling.new_generator(seed),
            stop_ids=frozenset(stop_ids),
            matcher=StopMatcher(req.stop, include=req.include_stop_str_in_output),
            detok=self.tokenizer.incremental_decoder() if self.tokenizer is not None else None,
            admitted_s=now_s,
        )
        if hit is not None:
            # The model decides what a hit is worth (bounded replay ignores hits <= W and
            # rewinds to H - W); this also checks the prompt really starts with the prefix.
            state.tokens_to_feed_after_hit(prompt)
        live.hit_tokens = int(getattr(state, "hit_tokens", 0))
        if req.prompt_logprobs is not None:
            live.prompt_logprobs.append(None)  # the first prompt token has no context
        return live

    # ------------------------------------------------------------------ one step
    def _chunk_end(self, live: _Live) -> int:
        start, n = live.state.num_computed, len(live.prompt)
        c = self.config.prefill_chunk_tokens
        end = min(n, (start // c + 1) * c)
        if self.prefix_cache.enabled:
            aligned = (n // self.prefix_cache.block_tokens) * self.prefix_cache.block_tokens
            if start < aligned < end:
                end = aligned
        return end

    def _step(self, active: list[_Live], t0: float) -> None:
        chunks, plans = [], []
        for live in active:
            if live.prefilling:
                start, end = live.state.num_computed, self._chunk_end(live)
                tokens = live.prompt[start:end]
                want_all = live.request.prompt_logprobs is not None
                plans.append(("prefill", start, end))
                live.fed_prompt_tokens += end - start
            else:
                tokens = [live.tokens[-1]]
                want_all = False
                plans.append(("decode", None, None))
            device = self._device()
            chunks.append(self._chunk_cls(
                state=live.state,
                tokens=torch.tensor(tokens, dtype=torch.long, device=device),
                logits="all" if want_all else "last",
                decode=plans[-1][0] == "decode",
            ))
        outputs = self.model.forward(chunks)
        for live, plan, out in zip(active, plans, outputs, strict=True):
            logits = out.logits.detach().float().cpu()
            kind, start, end = plan
            if kind == "prefill":
                self._after_prefill_chunk(live, start, end, logits)
                if end < len(live.prompt):
                    continue
                if live.request.max_tokens == 0:
                    live.finish_reason = "length"
                    continue
            self._choose(live, logits[-1], time.perf_counter() - t0)

    def _after_prefill_chunk(self, live: _Live, start: int, end: int, logits: torch.Tensor) -> None:
        req = live.request
        if req.prompt_logprobs is not None:
            lp = sampling.log_softmax(logits)  # row r predicts prompt[start + r + 1]
            for r in range(end - start):
                pos = start + r + 1
                if pos < len(live.prompt):
                    live.prompt_logprobs.append(
                        sampling.token_logprob(lp[r], live.prompt[pos], req.prompt_logprobs))
            if req.return_logits:
                live.prompt_logits.append(logits)
        block = self.prefix_cache.block_tokens
        if self.prefix_cache.enabled and end % block == 0 and end > 0:
            prefix = live.prompt[:end]
            if not self.prefix_cache.contains(prefix):
                self.prefix_cache.store(prefix, live.state.export_prefix(end))

    def _choose(self, live: _Live, row: torch.Tensor, now_s: float) -> None:
        req = live.request
        scores = row
        if penalties.needs_adjusting(req):
            scores = penalties.adjusted_logits(row, req, live.prompt, live.tokens, live.stop_ids)
        token = sampling.sample(scores, req.temperature, live.generator, req.top_k, req.top_p,
                                    req.min_p)
        live.tokens.append(token)
        live.token_times.append(now_s)
        if req.logprobs is not None:
            live.logprobs.append(sampling.token_logprob(sampling.log_softmax(row), token, req.logprobs))
        if req.return_logits:
            live.logits.append(row.unsqueeze(0))
        if token in live.stop_ids:
            live.finish_reason, live.stop_reason = "stop", token
            return
        if live.detok is not None and live.matcher.push(
                live.detok.push(token), search=len(live.tokens) > req.min_tokens):
            live.finish_reason, live.stop_reason = "stop", live.matcher.hit
            return
        context_full = len(live.prompt) + len(live.tokens) >= self.model.config.max_position_embeddings
        if len(live.tokens) >= req.max_tokens or context_full:
            live.finish_reason = "length"

    # ------------------------------------------------------------------ results
    def _result(self, live: _Live, now_s: float) -> GenerateResult:
        text = None
        if live.detok is not None:
            if live.matcher.hit is None:
                live.matcher.push(live.detok.flush())
            text = live.matcher.output_text()
        first = live.token_times[0] if live.token_times else None
        gaps = tuple(b - a for a, b in zip(live.token_times[:-1], live.token_times[1:], strict=True))
        req = live.request
        st = live.state
        engagement = RequestEngagement(
            prompt_tokens=len(live.prompt), hit_tokens=live.hit_tokens,
            replayed_tokens=int(getattr(st, "replayed_tokens", 0)),
            trimmed_chunks=int(getattr(st, "trimmed_chunks", 0)),
            trimmed_rows=int(getattr(st, "trimmed_rows", 0)),
            trim_layer=getattr(self.model, "cut_layer", None)
            if getattr(st, "trimmed_chunks", 0) else None)
        live.state = None  # release the caches
        return GenerateResult(
            request_id=live.request_id,
            prompt_ids=tuple(live.prompt),
            token_ids=tuple(live.tokens),
            text=text,
            finish_reason=live.finish_reason or "length",
            stop_reason=live.stop_reason,
            logprobs=tuple(live.logprobs) if req.logprobs is not None else None,
            prompt_logprobs=tuple(live.prompt_logprobs) if req.prompt_logprobs is not None else None,
            logits=torch.cat(live.logits) if live.logits else None,
            prompt_logits=torch.cat(live.prompt_logits) if live.prompt_logits else None,
            timings=RequestTimings(
                queued_s=live.admitted_s,
                ttft_s=first,
                total_s=now_s,
                token_latencies_s=gaps,
                prompt_tokens=len(live.prompt),
                prefix_hit_tokens=live.hit_tokens,
                prefill_tokens_fed=live.fed_prompt_tokens,
            ),
            engagement=engagement,
        )

    def _device(self) -> torch.device:
        device = getattr(self.model, "device", None)
        if device is not None:
            return torch.device(device)
        try:
            return next(self.model.weights.parameters()).device
        except (AttributeError, StopIteration):
            return torch.device("cpu")


def _seq_chunk_class():
    from runtime.model import SeqChunk

    return SeqChunk
