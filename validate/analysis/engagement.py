"""What the engagement ledger says about each comparison: which optimizations the
candidate was meant to exercise, on how many items each did, the paired delta split by
engagement and by prompt length, and the flags a warm run without hits deserves.

Which optimizations a candidate is expected to exercise: those it turns on and the
baseline does not.
- builtin: ``encoder_replay``, ``decoder_trim`` and each op run ``fused <op>`` (from
  the variants' normalised options);
- vllm: ``encoder_replay`` when the baseline passes ``--no-swa-bounded-replay`` and the
  candidate does not (replay is vLLM's default);
- openai: nothing can be told from an endpoint's config.

Whether one engaged on an item (None: the ledger cannot tell):
- ``encoder_replay``: replayed tokens > 0 (runtime); over HTTP, a prefix hit > 0 (the
  precondition: vLLM replays on every hit past its window but does not report it), and
  never when the server's log says bounded replay is off;
- ``decoder_trim``: a prefill chunk was trimmed (runtime only);
- ``fused <op>``: the op ran fused (runtime only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from validate.engines.engagement import Engagement, ServerCounters
from validate.gate.engagement import EngagementCount
from validate.stats.outcomes import PairedOutcomes
from validate.stats.subgroups import SubgroupDelta, subgroup_deltas

ENGAGED, NOT_ENGAGED, UNKNOWN = "engaged", "not engaged", "unknown"
NO_REPLAY_FLAG = "--no-swa-bounded-replay"

Ledger = Mapping[tuple[str, int], Engagement]


def _fused(options: Mapping) -> set[str]:
    from runtime.kernels.choice import fused_by_op  # light: no torch, no Triton

    try:
        return {op for op, on in fused_by_op(options.get("kernels", "reference")).items() if on}
    except Exception:  # a kernels value this process cannot read: expect nothing of it
        return set()


def expected_optimizations(kind: str, baseline: Mapping, candidate: Mapping) -> tuple[str, ...]:
    """The optimizations ``candidate`` turns on over ``baseline`` (stored variant
    configs; see the module doc)."""
    if kind == "builtin":
        base, cand = baseline.get("options") or {}, candidate.get("options") or {}
        out = [name for name in ("encoder_replay", "decoder_trim")
               if cand.get(name) and not base.get(name)]
        out += [f"fused {op}" for op in sorted(_fused(cand) - _fused(base))]
        return tuple(out)
    if kind == "vllm" and NO_REPLAY_FLAG in (baseline.get("args") or ()) \
            and NO_REPLAY_FLAG not in (candidate.get("args") or ()):
        return ("encoder_replay",)
    return ()


def replay_said_off(log_lines: Sequence[str]) -> bool:
    """The server's log says encoder-side bounded replay is off (vLLM: "SWA bounded
    replay needs ...", "... bounded replay is off/disabled"; a decoder-side line is
    about trimming only)."""
    for line in log_lines:
        low = line.lower()
        if "decoder" in low:
            continue
        if any(word in low for word in (" off", "disabl", "needs", "not supported")):
            return True
    return False


def engaged(optimization: str, e: Engagement | None, replay_off: bool = False) -> bool | None:
    """Whether ``optimization`` engaged on a request with ledger ``e`` (module doc)."""
    if e is None:
        return None
    if optimization == "encoder_replay":
        if replay_off:
            return False
        if e.replayed_tokens is not None:
            return e.replayed_tokens > 0
        return None if e.hit_tokens is None else e.hit_tokens > 0
    if optimization == "decoder_trim":
        return e.trimmed
    if optimization.startswith("fused "):
        if e.kernels is None:
            return None
        return str(e.kernels.get(optimization[len("fused "):], "")).startswith("fused")
    return None


def counts(expected: Sequence[str], ledger: Ledger, keys: Sequence[tuple[str, int]],
           replay_off: bool = False) -> tuple[EngagementCount, ...]:
    """Per expected optimization: on how many of the rows ``keys`` it engaged."""
    out = []
    for opt in expected:
        seen = [engaged(opt, ledger.get(k), replay_off) for k in keys]
        out.append(EngagementCount(optimization=opt, engaged=sum(s is True for s in seen),
                                   known=sum(s is not None for s in seen), n=len(keys)))
    return tuple(out)


def _row_label(expected: Sequence[str], e: Engagement | None, replay_off: bool) -> str:
    states = [engaged(opt, e, replay_off) for opt in expected]
    if any(s is False for s in states):
        return NOT_ENGAGED
    if all(s is True for s in states):
        return ENGAGED
    return UNKNOWN


def length_bucket(tokens: int | None) -> str:
    """Powers of two: "256-511" tokens; "unknown" without a count."""
    if tokens is None or tokens < 1:
        return UNKNOWN
    low = 1 << (int(tokens).bit_length() - 1)
    return f"{low}-{2 * low - 1}"


def _bucket_order(labels: Sequence[str]) -> list[str]:
    known = sorted({x for x in labels if x != UNKNOWN}, key=lambda s: int(s.split("-")[0]))
    return known + ([UNKNOWN] if UNKNOWN in labels else [])


@dataclass(frozen=True)
class PairEngagement:
    """The engagement side of one comparison row: the expected optimizations' counts
    on the candidate's paired rows, and the paired delta broken down."""

    expected: tuple[str, ...]
    counts: tuple[EngagementCount, ...]
    breakdown: tuple[SubgroupDelta, ...]
    replay_said_off: bool = False

    def to_dict(self) -> dict:
        return {"expected": list(self.expected), "counts": [c.to_dict() for c in self.counts],
                "breakdown": [b.to_dict() for b in self.breakdown],
                "replay_said_off": self.replay_said_off}


def pair_engagement(paired: PairedOutcomes, expected: Sequence[str], candidate: Ledger,
                    baseline: Ledger, prompt_tokens: Mapping[tuple[str, int], int | None],
                    log_lines: Sequence[str], alpha: float) -> PairEngagement:
    """Counts and breakdowns of one (candidate, task) on its rows paired with the
    baseline. Prompt length: the candidate's ledger, else the baseline's, else the
    stored response's prompt token count."""
    keys = list(zip(paired.item_ids, (int(r) for r in paired.repeats), strict=True))
    off = replay_said_off(log_lines)
    found = counts(expected, candidate, keys, off)
    breakdown: list[SubgroupDelta] = []
    if expected and keys:
        labels = [_row_label(expected, candidate.get(k), off) for k in keys]
        breakdown += subgroup_deltas(paired, labels, "engagement", alpha,
                                     order=(ENGAGED, NOT_ENGAGED, UNKNOWN))
    if keys:
        lengths = []
        for k in keys:
            e = candidate.get(k) or baseline.get(k)
            n = e.prompt_tokens if e is not None and e.prompt_tokens is not None \
                else prompt_tokens.get(k)
            lengths.append(length_bucket(n))
        breakdown += subgroup_deltas(paired, lengths, "prompt_tokens", alpha,
                                     order=_bucket_order(lengths))
    return PairEngagement(tuple(expected), found, tuple(breakdown), off)


def hit_notes(variant: str, task: str, ledger: Ledger, n_rows: int,
              passes: Sequence[ServerCounters]) -> list[str]:
    """Flags of a warm run whose measured pass found nothing in the prefix cache, from
    the per-item ledger and from the server's counters (any engine)."""
    notes = []
    hits = [e.hit_tokens for e in ledger.values() if e.hit_tokens is not None]
    if hits and not any(hits):
        notes.append(f"warm run: {variant}/{task} found no prefix-cache hit on any of its "
                     f"{len(hits)} items with a known hit count (engagement ledger); replay "
                     f"cannot have engaged (prefix caching off, or prompts shorter than a "
                     f"cache block?)")
    elif not hits and n_rows:
        notes.append(f"warm run: {variant}/{task}: prefix-cache hits are unknown (the engine "
                     f"does not report them; for vLLM pass --enable-prompt-tokens-details), "
                     f"so nothing shows the warm pass hit")
    for p in passes:
        delta = p.delta()
        if p.source != "metrics":
            continue
        if delta.get("prefix_cache_queries", 0) > 0 and delta.get("prefix_cache_hits") == 0:
            notes.append(f"warm run: {variant}: the server's /metrics counted "
                         f"{delta['prefix_cache_queries']:.0f} prefix-cache query tokens and "
                         f"0 hits during the quality pass")
        elif n_rows and delta.get("prefix_cache_queries") == 0:
            # vLLM with --no-enable-prefix-caching does not even look (docs/vllm-cpu.md §4)
            notes.append(f"warm run: {variant}: the server's /metrics counted no "
                         f"prefix-cache queries during the quality pass: its prefix cache "
                         f"is off")
    return notes
