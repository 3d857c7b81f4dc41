"""The engagement ledger's records: did an optimization actually run on a request?

A PASS means nothing if the optimization never engaged (bounded replay needs a prefix
hit; vLLM turns it off with a log line, not an error; decoder trim depends on the
prompt's length). So every stored response carries, where the engine can tell, what was
done to its prompt; the store keeps it (``validate.store``'s ``engagement`` table) and
the gate checks it (``validate.gate.engagement``).

Unknown is ``None``, never 0: an OpenAI-compatible server that does not report cached
tokens has not "hit 0 tokens", and a ledger that said so would make a replay variant
look engaged-nowhere (or, summed, make a warm run look cold).

Sources:
- ``runtime``: the builtin engine, from the runtime's own per-request state
  (``runtime.engine.requests.RequestEngagement``) and the kernel registry's choice.
- ``usage``: an OpenAI-compatible server's ``usage.prompt_tokens_details.cached_tokens``.
  vLLM sends it only with ``--enable-prompt-tokens-details`` and leaves the whole
  ``prompt_tokens_details`` out when it is 0, so an absent field is 0 only when the
  caller knows the server reports it (``reports_cached_tokens``), else unknown.

``ServerCounters`` is the per-variant side: counters read before and after a variant's
quality pass (the runtime's totals, or a server's Prometheus ``/metrics``) and the
server log's bounded-replay lines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SOURCES = ("runtime", "usage")


@dataclass(frozen=True)
class Engagement:
    """What was done to one (item, variant) request; every field None = unknown.

    ``trimmed``: whether any prefill chunk of the prompt ran the layers from
    ``trim_layer`` on with fewer rows (``trimmed_rows`` dropped). ``kernels``: op ->
    implementation that ran ("reference", "fused (cuda)", ...).
    """

    source: str
    prompt_tokens: int | None = None
    hit_tokens: int | None = None
    replayed_tokens: int | None = None
    trimmed: bool | None = None
    trim_layer: int | None = None
    trimmed_rows: int | None = None
    kernels: Mapping[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "prompt_tokens": self.prompt_tokens,
                "hit_tokens": self.hit_tokens, "replayed_tokens": self.replayed_tokens,
                "trimmed": self.trimmed, "trim_layer": self.trim_layer,
                "trimmed_rows": self.trimmed_rows,
                "kernels": None if self.kernels is None else dict(self.kernels)}


def from_runtime(parts: Sequence[Any], kernels: Mapping[str, str]) -> Engagement:
    """The ledger of one task request answered by the runtime as ``parts`` (one
    ``RequestEngagement`` per runtime request: one for a generation, one per choice for
    multiple choice), summed; trimmed when any part was."""
    trimmed = any(p.trimmed_chunks for p in parts)
    layers = {p.trim_layer for p in parts if p.trim_layer is not None}
    return Engagement(
        source="runtime",
        prompt_tokens=sum(p.prompt_tokens for p in parts),
        hit_tokens=sum(p.hit_tokens for p in parts),
        replayed_tokens=sum(p.replayed_tokens for p in parts),
        trimmed=trimmed,
        trim_layer=min(layers) if layers else None,
        trimmed_rows=sum(p.trimmed_rows for p in parts),
        kernels=dict(kernels))


def cached_tokens(usage: Mapping | None, reports_cached_tokens: bool) -> int | None:
    """Cached prompt tokens from an OpenAI ``usage`` object, or None when unknown (see
    the module doc for when an absent field means 0)."""
    if not isinstance(usage, Mapping) or not usage:
        return None
    details = usage.get("prompt_tokens_details")
    if isinstance(details, Mapping):
        value = details.get("cached_tokens")
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if value is None and reports_cached_tokens:
            return 0
        return None
    if details is None and reports_cached_tokens and isinstance(usage.get("prompt_tokens"), int):
        return 0
    return None


def from_usage(usages: Sequence[Mapping | None], reports_cached_tokens: bool) -> Engagement:
    """The ledger of one task request from the server's usage object(s) (one per HTTP
    call: several for multiple choice). Replay and trim are not visible per request
    over HTTP: unknown."""
    hits = [cached_tokens(u, reports_cached_tokens) for u in usages]
    prompts = [u.get("prompt_tokens") if isinstance(u, Mapping) else None for u in usages]
    return Engagement(
        source="usage",
        prompt_tokens=sum(prompts) if prompts and all(isinstance(p, int) for p in prompts)
        else None,
        hit_tokens=sum(hits) if hits and all(h is not None for h in hits) else None)


@dataclass(frozen=True)
class ServerCounters:
    """Counters of one variant's quality pass: ``before`` and ``after`` it (name ->
    value; a name missing from either is unknown), where they came from, and the
    server log's bounded-replay lines (vLLM says "off" there, not in an error)."""

    source: str  # "runtime" | "metrics"
    before: Mapping[str, float] = field(default_factory=dict)
    after: Mapping[str, float] = field(default_factory=dict)
    log_lines: tuple[str, ...] = ()

    def delta(self) -> dict[str, float]:
        """after - before for every counter known at both reads."""
        return {k: self.after[k] - self.before[k] for k in self.after if k in self.before}
