"""Execute a plan: variants x tasks x items x repeats -> engine -> store -> scores.

Order of work, and why:
1. ``begin_run`` records this attempt with its identity (git SHA, plan hash, package
   versions, hardware, seeds) and the whole plan, so the analysis can be rebuilt from
   the store alone.
2. Per variant, ``store.pending`` registers every planned request and returns only
   those without a stored response: a rerun of the same plan resumes and never asks
   the engine again for something it answered (a kill loses at most what was in
   flight).
3. In warm mode a priming pass sends the pending prompts first (one output token, not
   stored) so the measured requests hit the prefix cache and encoder-side replay
   actually engages. An engine with its own ``prime`` (builtin: prefill only) primes
   in this thread, so Ctrl-C stops it at once.
4. Each response is committed the moment it arrives, *before* any scoring; a request
   that fails for good is recorded as a failure (coverage reports it; a rerun retries
   it).
5. Stored responses without scores are scored by the tasks' own scorers.
6. With a ``[speed]`` table, the variant's headline concurrency sweep (``speed_pass``),
   right after its quality pass and stored per variant; a rerun skips a stored sweep.
   With ``[speed] rounds``, after all variants: interleaved speed rounds of all of them
   (``rounds_pass``).
7. Builtin engine: teacher-forced fidelity of each variant vs the baseline
   (``fidelity_pass``), into the store.

Every phase moves a bar of the ``progress`` it is given (``validate.progress``):
"<variant>: starting the engine", "<variant>: priming", "<variant>: quality",
"<variant>: speed sweep", "fidelity".
Ctrl-C (KeyboardInterrupt) in any phase stops the engine at its next step, marks the
run "interrupted" and re-raises; a rerun resumes (``validate.interrupt`` turns a
second Ctrl-C into an immediate exit).
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field
from pathlib import Path

from validate.engines.base import EngineFailure, EngineResult, iterate_blocking
from validate.engines.engagement import ServerCounters
from validate.engines.errors import EngineUnanswered
from validate.plan.schema import Plan
from validate.progress import QUIET, Bar, Progress
from validate.runner.engines import EngineFactory, check_engines, factory_for
from validate.runner.fidelity_pass import fidelity_pass
from validate.runner.identity import run_identity
from validate.runner.requests import load_tasks, planned_requests, priming_request
from validate.runner.rounds_pass import rounds_pass
from validate.runner.servers import record_server
from validate.runner.speed_pass import speed_pass
from validate.scoring import score_pending
from validate.store import PlannedRequest, ResponseRecord, ResultsStore, RunInfo


@dataclass(frozen=True)
class VariantRunStats:
    variant: str
    planned: int
    already_stored: int
    sent: int
    stored: int
    failed: int
    first_failure: str | None = None  # the first failed request's error, one line

    def failure_line(self) -> str | None:
        """``variant b: 2 of 8 requests failed; the first: <what the engine said>``."""
        if not self.failed:
            return None
        return (f"variant {self.variant}: {self.failed} of {self.sent} requests failed; "
                f"the first: {self.first_failure}")


@dataclass(frozen=True)
class RunOutcome:
    """What one execution did (the analysis reads the store, not this)."""

    run: RunInfo
    plan_hash: str
    variants: tuple[VariantRunStats, ...] = field(default=())
    scored: int = 0
    swept: tuple[str, ...] = ()  # variants whose headline sweep ran in this execution

    @property
    def failed(self) -> int:
        return sum(v.failed for v in self.variants)


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def _record(result: EngineResult) -> ResponseRecord:
    return ResponseRecord(response=result.response, timings=result.timings,
                          token_logprobs=result.token_logprobs, raw=result.raw,
                          attempts=result.attempts, engine=dict(result.engine),
                          engagement=result.engagement)


def _prime(engine, todo: list[PlannedRequest], bar: Bar) -> None:
    """Warm pass: every pending prompt once, answers discarded. An engine with its own
    ``prime(requests, on_primed)`` does it its way (builtin: prefill only, in this
    thread); others get the one-token copies through their normal stream."""
    prime = getattr(engine, "prime", None)
    if prime is not None:
        prime([p.request for p in todo], on_primed=bar.update)
        return
    for _ in iterate_blocking(engine, [priming_request(p.request) for p in todo]):
        bar.advance()


def _store_counters(store: ResultsStore, run: RunInfo, variant: str, engine,
                    before: dict | None, after: dict | None) -> None:
    """The engine's counters around the quality pass (an unanswered read is stored as
    an empty map: unknown) and the server log's bounded-replay lines."""
    lines = getattr(engine, "replay_log_lines", None)
    store.put_counters(run, variant, ServerCounters(
        source=getattr(engine, "counters_source", "engine"), before=before or {},
        after=after or {}, log_lines=tuple(lines() if lines is not None else ())))


def _run_variant(store: ResultsStore, run: RunInfo, plan: Plan, factory: EngineFactory,
                 planned: list[PlannedRequest], variant: str,
                 progress: Progress) -> VariantRunStats:
    todo = store.pending(run, planned)
    stored = failed = 0
    first_failure = None
    if todo:
        with contextlib.ExitStack() as held:
            # building the engine (weights, a vLLM server's start) can take minutes too
            with progress.bar(f"{variant}: starting the engine", None):
                engine = held.enter_context(factory.open(plan.variant(variant)))
            if plan.warm:
                with progress.bar(f"{variant}: priming", len(todo)) as bar:
                    _prime(engine, todo, bar)
            read = getattr(engine, "read_counters", None)
            before = read() if read is not None else None
            with progress.bar(f"{variant}: quality", len(todo)) as bar:
                for outcome in iterate_blocking(engine, [p.request for p in todo]):
                    p = todo[outcome.index]
                    if isinstance(outcome, EngineFailure):
                        error = one_line(f"{type(outcome.error).__name__}: {outcome.error}")
                        store.put_failure(run, p, error, outcome.attempts)
                        failed += 1
                        first_failure = first_failure or error
                    else:
                        store.put_response(run, p, _record(outcome))
                        stored += 1
                    bar.advance()
            if read is not None:
                _store_counters(store, run, variant, engine, before, read())
            record_server(store, run, variant, engine)
    stats = VariantRunStats(variant, len(planned), len(planned) - len(todo), len(todo), stored,
                            failed, first_failure)
    if failed and not stored and variant == plan.baseline:
        # the reference answered nothing: a broken endpoint or setup, with nothing to compare
        # a candidate against (a candidate that answers nothing is INVALID, a verdict)
        raise EngineUnanswered(f"{plan.source}: {stats.failure_line()} (nothing was answered; "
                               f"the failures are recorded in {store.path})")
    return stats


def aa_order(planned: list[PlannedRequest], seed: int) -> list[PlannedRequest]:
    """The A/A copy's requests in a seeded shuffle of the baseline's order: the same
    requests at the same concurrency, batched with other neighbours, which is the
    noise a rerun of the baseline has (0 in batch-invariant mode)."""
    shuffled = list(planned)
    random.Random(seed).shuffle(shuffled)
    return shuffled


def adopt_legacy(plan: Plan, store: ResultsStore) -> int:
    """A store written by v41val 0.1 keys this plan's responses by ``plan.legacy_hash``
    (the options as written, not normalised): re-key them (fidelity included) to
    ``plan.hash`` so the rerun resumes instead of starting over. Returns runs moved."""
    return store.rekey(plan.legacy_hash, plan.hash, {v.name: v.config() for v in plan.variants})


def run_plan(plan: Plan, store: ResultsStore, *, workspace: Path | None = None,
             factory: EngineFactory | None = None,
             progress: Progress = QUIET) -> RunOutcome:
    """Run (or resume) ``plan`` into ``store``. The baseline runs first, so an
    interrupted ablation has its reference before any candidate."""
    workspace = workspace or store.path.parent
    loaded = load_tasks(plan)
    factory = factory or factory_for(plan, workspace)
    check_engines(plan, factory)  # every input checked before the first write
    store.settle_abandoned()  # runs killed before they could say so: interrupted
    adopt_legacy(plan, store)
    first = [plan.baseline] + ([plan.aa_variant] if plan.aa_variant else [])
    order = first + [v for v in plan.variant_names if v not in first]
    identity = run_identity(plan.engine.kind)
    with store.atomic():  # a variant the store refuses leaves no run behind
        run = store.begin_run(plan.hash, plan_name=plan.name, seeds=(plan.seed,),
                              plan=plan.to_dict(), identity=identity)
        for name in order:
            store.put_variant(run, name, plan.variant(name).config(),
                              is_baseline=name == plan.baseline)
    stats, swept = [], []
    status, scored = "failed", 0
    try:
        for name in order:
            planned = planned_requests(plan, loaded, name)
            if name == plan.aa_variant:
                planned = aa_order(planned, plan.seed)
            stats.append(_run_variant(store, run, plan, factory, planned, name, progress))
            scored += score_pending(store, plan.hash, loaded)
            if speed_pass(plan, store, run, factory, name, progress):
                swept.append(name)
        rounds_pass(plan, store, run, factory, progress)
        fidelity_pass(plan, store, factory, loaded, progress)
        status = "complete" if not any(s.failed for s in stats) else "incomplete"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        store.finish_run(run, status)
    return RunOutcome(run=run, plan_hash=plan.hash, variants=tuple(stats), scored=scored,
                      swept=tuple(swept))
