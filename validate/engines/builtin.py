"""The ``builtin`` engine: the V4.1 runtime in this process, batched, full logits.

All requests of a ``stream`` call go to the runtime engine at once; it keeps up to
``max_batch_requests`` in flight (continuous batching: a finished request's slot is
refilled at the next step), which is the operating point's concurrency. Each result is
handed back the moment the runtime finishes it (completion order), so the caller can
store it before the next one exists.

Timings come from the runtime engine and are taken from each request's admission into
the batch (a closed-loop client with ``max_batch_requests`` users sends its next
request when a slot frees): TTFT is admission -> first token, the inter-token gaps are
the runtime's, e2e is admission -> last token. ``engine["prefix_hit_tokens"]`` says how
much of the prompt came from the prefix cache: encoder-side replay only engages on a
hit, so in warm mode the runner calls ``prime`` first (every prompt's prefill, no
output, in the caller's thread), and the measured pass then hits on every prompt longer
than a cache block.

Stopping: ``stream`` runs the runtime in a worker thread; when its consumer stops
listening (Ctrl-C in the runner cancels it) the worker abandons the batch before the
next model step, so a stop takes one step, not the rest of the batch.

Variants built from one ``WeightsPool`` share one ``V41Weights``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime.options import RuntimeOptions
from runtime.scheduling import EngineConfig
from tasks.request import Generation, Loglikelihoods, Request
from validate.engines.base import (
    EngineFailure,
    EngineOutcome,
    EngineResult,
    Timings,
    TokenLogprob,
)
from validate.engines.builtin_requests import (
    choice_requests,
    continuation_score,
    generate_request,
)
from validate.engines.builtin_source import ModelSource, WeightsPool
from validate.engines.engagement import from_runtime
from validate.engines.errors import EngineError
from validate.perturb import Perturbation, perturbation_from


@dataclass(frozen=True)
class BuiltinEngineConfig:
    """One builtin variant: which weights, which runtime options, how it is batched.

    ``scheduling``: the runtime engine's settings (``runtime.scheduling.EngineConfig``:
    batch bound, prefill chunk, prefix-cache blocks and size, base seed).
    ``top_logprobs``: the top-k alternatives of every generated token (None: none).
    ``warm``: the variant runs warm (the runner primes it with ``prime``; teacher-forced
    fidelity then scores through a prefix hit).
    ``ignore_eos``: generate until a stop string or ``max_gen_toks`` (speed benchmarks,
    so every variant produces the same number of tokens).
    """

    source: ModelSource = field(default_factory=ModelSource)
    options: RuntimeOptions = field(default_factory=RuntimeOptions)
    scheduling: EngineConfig = field(default_factory=EngineConfig)
    top_logprobs: int | None = None
    warm: bool = False
    variant: str = "builtin"
    perturb: Perturbation = field(default_factory=Perturbation)
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        if self.top_logprobs is not None and self.top_logprobs < 0:
            raise EngineError(f"builtin engine: top_logprobs must be >= 0, got {self.top_logprobs}")
        if self.options.decode == "graphs" and not self.source.device.startswith("cuda"):
            raise EngineError(f"variant {self.variant}: decode = 'graphs' needs the builtin engine on a CUDA "
                              f"device, got device = {self.source.device!r}")

    @property
    def max_batch_requests(self) -> int:
        return self.scheduling.max_batch_requests

    def describe(self) -> dict:
        return {"engine": "builtin", "variant": self.variant, "source": self.source.describe(),
                "options": self.options.to_dict(),
                "concurrency": self.max_batch_requests, "warm": self.warm,
                **({"perturb": self.perturb.to_dict()} if self.perturb.active else {})}


@dataclass
class _Pending:
    """A task request split into runtime requests (one per choice for loglikelihood)."""

    index: int
    request: Request
    parts: list[int]
    pairs: list | None = None
    results: dict = field(default_factory=dict)


class BuiltinEngine:
    """The runtime in process behind the ``Engine`` protocol (see the module doc)."""

    name = "builtin"

    def __init__(self, config: BuiltinEngineConfig | None = None,
                 pool: WeightsPool | None = None) -> None:
        from runtime.build import build_model
        from runtime.server.observed import ObservedEngine

        self.config = config or BuiltinEngineConfig()
        self.pool = pool if pool is not None else WeightsPool()
        self.weights = self.pool.weights(self.config.source)
        perturb = self.config.perturb
        self.model = perturb.wrap(build_model(
            perturb.apply_weights(self.weights), self.config.options,
            max_batch=self.config.scheduling.max_batch_requests))
        self.tokenizer = self.config.source.tokenizer()
        self.runtime = ObservedEngine(self.model, self.tokenizer,
                                      self.config.scheduling)
        self._lock = threading.Lock()  # the runtime engine runs one generate at a time

    @property
    def max_positions(self) -> int:
        return self.model.config.max_position_embeddings

    counters_source = "runtime"

    def read_counters(self) -> dict[str, float]:
        """The model's own totals (``runtime.counters``): read before and after the
        quality pass, their difference is what the runtime did in it."""
        return {k: float(v) for k, v in self.model.counters.snapshot().items()}

    async def aclose(self) -> None:
        """Nothing to release; the weights stay in the pool for other variants."""

    # ------------------------------------------------------------------ protocol
    async def stream(self, requests: Sequence[Request]) -> AsyncIterator[EngineOutcome]:
        """Yield one outcome per request in completion order; a request the runtime
        cannot take (too long, empty, chat loglikelihood) is an ``EngineFailure``."""
        if not requests:
            return
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        stop = threading.Event()

        def deliver(item) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, item)

        worker = loop.run_in_executor(None, self._run_blocking, list(requests), deliver, stop)
        delivered = 0
        try:
            while delivered < len(requests):
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                delivered += 1
                yield item
        finally:
            stop.set()
            if not worker.done():
                await worker

    def run(self, requests: Sequence[Request]) -> list[EngineOutcome]:
        """Blocking: all outcomes, in input order (warm: primed first, as the runner
        primes before it streams)."""
        if self.config.warm:
            self.prime(requests)
        out: list[EngineOutcome | None] = [None] * len(requests)

        def deliver(item) -> None:
            if isinstance(item, BaseException):
                raise item
            out[item.index] = item

        self._run_blocking(list(requests), deliver, threading.Event())
        return out  # type: ignore[return-value]

    # ------------------------------------------------------------------ the work
    def _run_blocking(self, requests: list[Request], deliver, stop: threading.Event) -> None:
        try:
            pending, flat, failures = self._prepare(requests)
            for failure in failures:
                deliver(failure)
            if not flat:
                return
            with self._lock:
                self._generate(pending, flat, deliver, stop)
        except BaseException as exc:  # handed to the consumer, which re-raises it
            deliver(exc)

    def _prepare(self, requests: list[Request]):
        pending: dict[int, _Pending] = {}
        flat: list[tuple] = []  # (GenerateRequest, owner index)
        failures = []
        for index, request in enumerate(requests):
            rid = f"{request.task}/{request.item_id}#{index}"
            try:
                if request.kind == "loglikelihood":
                    parts, pairs = choice_requests(request, self.tokenizer, self.max_positions, rid)
                else:
                    parts = [generate_request(request, self.tokenizer, self.max_positions,
                                              self.config.top_logprobs, rid,
                                              self.config.ignore_eos)]
                    pairs = None
            except (EngineError, ValueError) as exc:
                failures.append(EngineFailure(index, request, EngineError(str(exc))))
                continue
            slots = list(range(len(flat), len(flat) + len(parts)))
            flat.extend((part, index) for part in parts)
            pending[index] = _Pending(index, request, slots, pairs)
        return pending, flat, failures

    def prime(self, requests: Sequence[Request], on_primed=None) -> None:
        """Prefill every distinct prompt of ``requests`` once (no output) so its blocks
        are cached, in the caller's thread (Ctrl-C stops it between two torch ops).
        ``on_primed(done)`` reports progress in units of ``requests`` (a request whose
        prompt is primed, or that needs no priming, counts as done)."""
        from runtime.engine.requests import GenerateRequest

        _, flat, _ = self._prepare(list(requests))
        seen, primers = set(), []
        for r, _ in flat:
            if r.prompt_logprobs is None and r.prompt_ids not in seen:
                seen.add(r.prompt_ids)
                primers.append(GenerateRequest(prompt_ids=r.prompt_ids, max_tokens=0))
        total = len(requests)
        if primers:
            # Prefill stores a snapshot at every chunk end and at the last whole block:
            # keep room for all primed prompts, or LRU would evict the early ones.
            chunk = self.config.scheduling.prefill_chunk_tokens
            needed = sum(len(r.prompt_ids) // chunk + 2 for r in primers)
            cache = self.runtime.prefix_cache
            if cache.enabled and cache.capacity < needed:
                cache.capacity = needed
            done = [0]

            class Counter:
                def on_token(self, index, token_id, safe_text, logprob):
                    return None

                def on_finish(self, index, result):
                    done[0] += 1
                    if on_primed is not None:
                        on_primed(total * done[0] / len(primers))

            with self._lock:
                self.runtime.generate_observed(primers, Counter())
        if on_primed is not None:
            on_primed(total)

    def _generate(self, pending: dict[int, _Pending], flat: list[tuple], deliver,
                  stop: threading.Event) -> None:
        started_epoch = time.time()
        engine = self

        class Observer:
            def on_step(self):
                if stop.is_set():
                    raise _Cancelled()

            def on_token(self, index, token_id, safe_text, logprob):
                if stop.is_set():
                    raise _Cancelled()

            def on_finish(self, slot, result):
                owner = pending[flat[slot][1]]
                owner.results[slot] = result
                if len(owner.results) == len(owner.parts):
                    deliver(engine._outcome(owner, started_epoch))

        try:
            self.runtime.generate_observed([r for r, _ in flat], Observer())
        except _Cancelled:
            return

    # ------------------------------------------------------------------ results
    def _outcome(self, owner: _Pending, started_epoch: float) -> EngineResult:
        results = [owner.results[s] for s in owner.parts]
        ledger = (from_runtime([r.engagement for r in results], self.model.kernels_used())
                  if all(r.engagement is not None for r in results) else None)
        meta = {**self.config.describe(),
                "prompt_tokens": [r.timings.prompt_tokens for r in results],
                "prefix_hit_tokens": sum(r.timings.prefix_hit_tokens for r in results),
                "prefill_tokens_fed": sum(r.timings.prefill_tokens_fed for r in results)}
        if owner.pairs is not None:
            scores = [continuation_score(r, pair) for r, pair in zip(results, owner.pairs,
                                                                     strict=True)]
            response = Loglikelihoods(tuple(s for s, _ in scores), tuple(g for _, g in scores))
            first = min(r.timings.queued_s for r in results)
            last = max(r.timings.total_s for r in results)
            timings = Timings(started_at_s=started_epoch + first, e2e_s=last - first,
                              n_prompt_tokens=sum(r.timings.prompt_tokens for r in results),
                              n_output_tokens=0)
            meta["continuation_tokens"] = [len(p.continuation) for p in owner.pairs]
            return EngineResult(owner.index, owner.request, response, timings, engine=meta,
                                engagement=ledger)
        r = results[0]
        t = r.timings
        response = Generation(r.text or "", "stop" if r.finish_reason == "stop" else "length",
                              len(r.token_ids))
        timings = Timings(
            started_at_s=started_epoch + t.queued_s,
            e2e_s=t.total_s - t.queued_s,
            ttft_s=None if t.ttft_s is None else t.ttft_s - t.queued_s,
            itl_s=tuple(t.token_latencies_s),
            n_prompt_tokens=t.prompt_tokens,
            n_output_tokens=len(r.token_ids),
        )
        meta["output_token_ids"] = list(r.token_ids)
        meta["stop_reason"] = r.stop_reason
        logprobs = None
        if r.logprobs is not None:
            logprobs = tuple(self._token_logprob(lp) for lp in r.logprobs)
        return EngineResult(owner.index, owner.request, response, timings,
                            token_logprobs=logprobs, engine=meta, engagement=ledger)

    def _token_logprob(self, lp) -> TokenLogprob:
        text = self.tokenizer.decode([lp.token_id])
        top = tuple((self.tokenizer.decode([i]), float(v))
                    for i, v in zip(lp.top_ids, lp.top_logprobs, strict=True))
        return TokenLogprob(text, float(lp.logprob), top)

    # ------------------------------------------------------------------ fidelity inputs
    def encode(self, request: Request) -> tuple[int, ...]:
        from validate.engines.builtin_requests import prompt_text

        return tuple(self.tokenizer.encode(prompt_text(request)))

    def teacher_forced(self, prompts: Sequence[Sequence[int]],
                       forced: Sequence[Sequence[int]]) -> list:
        """Full float32 logits predicting each forced token (see ``builtin_teacher``)."""
        from validate.engines.builtin_teacher import teacher_forced_logits

        with self._lock:
            return teacher_forced_logits(self.model, prompts, forced, warm=self.config.warm,
                                         block_tokens=self.config.scheduling.prefix_block_tokens)


class _Cancelled(Exception):
    """The consumer stopped listening: abandon the rest of the batch."""


def engine_for_plan(settings: Mapping[str, Any], options: RuntimeOptions, *,
                    perturb: Mapping[str, Any] | None = None, concurrency: int = 8,
                    seed: int = 0, pool: WeightsPool | None = None,
                    variant: str = "builtin", warm: bool = False,
                    ignore_eos: bool = False) -> BuiltinEngine:
    """A builtin engine from a plan's ``[engine]`` settings (preset | checkpoint,
    device, dtype, seed, overrides, max_batch_requests, prefill_chunk_tokens,
    prefix_cache_entries (0: no prefix cache), prefix_block_tokens) and one
    variant's options. ``concurrency`` is the batch bound unless the settings give
    ``max_batch_requests``; ``seed`` is the base seed of sampled requests;
    ``ignore_eos`` for speed sweeps (every variant produces the same token count)."""
    return BuiltinEngine(config_for_plan(settings, options, perturb=perturb,
                                         concurrency=concurrency, seed=seed, variant=variant,
                                         warm=warm, ignore_eos=ignore_eos), pool)


def config_for_plan(settings: Mapping[str, Any], options: RuntimeOptions, *,
                    perturb: Mapping[str, Any] | None = None, concurrency: int = 8,
                    seed: int = 0, variant: str = "builtin", warm: bool = False,
                    ignore_eos: bool = False) -> BuiltinEngineConfig:
    """The ``BuiltinEngineConfig`` of ``engine_for_plan``, checked but not loaded: the
    runner builds it for every variant before it writes anything, so a bad dtype or a
    missing device fails before the store is touched."""
    checkpoint = settings.get("checkpoint")
    source = ModelSource(
        preset=None if checkpoint else settings.get("preset", "tiny"),
        seed=int(settings.get("seed", 0)), checkpoint=checkpoint,
        overrides=tuple(sorted(dict(settings.get("overrides", {})).items())),
        dtype=settings.get("dtype"), device=settings.get("device", "cpu"))
    scheduling = EngineConfig(
        seed=seed, max_batch_requests=int(settings.get("max_batch_requests", concurrency)),
        **{k: int(settings[k]) for k in ("prefill_chunk_tokens", "prefix_cache_entries",
                                         "prefix_block_tokens") if k in settings})
    return BuiltinEngineConfig(
        source=source, options=options, scheduling=scheduling, warm=warm, variant=variant,
        perturb=perturbation_from(perturb or {}), ignore_eos=ignore_eos)
