"""The engagement ledger on the builtin engine: what the store says each request's
optimization did equals what the runtime counted itself (``runtime.counters``), and
equals what the switch must do on these prompts (replay of exactly W tokens after a
hit longer than W; a trim of every prefill chunk longer than W)."""

from __future__ import annotations

import pytest

from validate.analysis import analyze_run
from validate.plan import load_plan
from validate.runner import run_plan
from validate.store import ResultsStore

pytestmark = pytest.mark.slow  # the trained testbed on CPU: a few seconds per variant

TASK = "testbed_lookup"
W = 32  # the testbed's sliding window

PLAN = f"""\
name = "ledger"
baseline = "exact"
warm = true
concurrency = 4
fidelity_prompts = 0

[engine]
kind = "builtin"
preset = "testbed"
{{engine_extra}}

[variants.exact]
swa = "exact"
[variants.bounded]
swa = "bounded"
[variants.replay]
swa = "bounded"
decoder_trim = false

[[tasks]]
name = "{TASK}"
limit = 6
max_gen_toks = 2

[policy.engagement]
min_fraction = 0.9
[policy.tasks.{TASK}]
margin = 5.0
"""


def _run(tmp_path, engine_extra: str = ""):
    path = tmp_path / "plan.toml"
    path.write_text(PLAN.format(engine_extra=engine_extra))
    plan = load_plan(path)
    store = ResultsStore.open(tmp_path / "results.sqlite")
    run_plan(plan, store)
    return plan, store


def _chunks(start: int, end: int, chunk: int = 256, block: int = 64) -> list[int]:
    """Prefill chunk lengths of positions [start, end) (runtime.engine's rule)."""
    out, aligned = [], end // block * block
    while start < end:
        stop = min(end, (start // chunk + 1) * chunk)
        if start < aligned < stop:
            stop = aligned
        out.append(stop - start)
        start = stop
    return out


def test_ledger_equals_the_runtime_counters_and_the_switch_semantics(tmp_path):
    plan, store = _run(tmp_path)
    with store:
        for variant in ("exact", "bounded", "replay"):
            ledger = store.engagement(plan.hash, variant, TASK)
            assert len(ledger) == 6 and all(e.source == "runtime" for e in ledger.values())
            [passes] = store.counters(plan.hash, variant)
            did = passes.delta()  # the model's own totals over the quality pass
            assert did["hit_tokens"] == sum(e.hit_tokens for e in ledger.values())
            assert did["prefix_hits"] == sum(e.hit_tokens > 0 for e in ledger.values())
            assert did["replayed_tokens"] == sum(e.replayed_tokens for e in ledger.values())
            assert did["trimmed_rows"] == sum(e.trimmed_rows for e in ledger.values())
            assert did["trimmed_chunks"] >= sum(bool(e.trimmed) for e in ledger.values())
            for e in ledger.values():
                assert e.prompt_tokens > 7 * W and e.hit_tokens > W  # warm: every prompt hit
                assert e.kernels and set(e.kernels.values()) == {"reference"}
                if variant == "exact":
                    assert (e.replayed_tokens, e.trimmed, e.trimmed_rows) == (0, False, 0)
                    assert e.trim_layer is None
                elif variant == "replay":
                    assert e.replayed_tokens == W and e.trimmed is False
                else:
                    # replay rewinds to H - W; what is fed from there is cut into chunks
                    # at multiples of 256 and at the prompt's last whole 64-token block
                    chunks = _chunks(e.hit_tokens - W, e.prompt_tokens)
                    assert e.replayed_tokens == W
                    assert e.trimmed_rows == sum(max(0, n - W) for n in chunks)
                    assert e.trimmed is any(n > W for n in chunks)
                    assert (e.trim_layer is None) is (not e.trimmed)


        analysis = analyze_run(store)
    replay = analysis.comparison("replay", TASK)
    assert replay.status != "INVALID"  # engaged on every item: the gate judges it
    [count] = replay.engagement.counts
    assert (count.optimization, count.engaged, count.known, count.n) == (
        "encoder_replay", 6, 6, 6)
    groups = {(b.by, b.group): b.n_rows for b in replay.engagement.breakdown}
    assert groups[("engagement", "engaged")] == 6
    assert sum(n for (by, _), n in groups.items() if by == "prompt_tokens") == 6
    # with block-aligned hits the fed suffix is rarely longer than W: trim is counted
    # on the items where it ran, and the gate says so when that is too few
    trim = {c.optimization: c for c in analysis.comparison("bounded", TASK).engagement.counts}
    assert trim["decoder_trim"].engaged == sum(
        bool(e.trimmed) for e in store_ledger(tmp_path, plan, "bounded").values())


def store_ledger(tmp_path, plan, variant):
    with ResultsStore.open(tmp_path / "results.sqlite") as store:
        return store.engagement(plan.hash, variant, TASK)


def test_without_a_prefix_cache_replay_cannot_engage_and_the_gate_says_invalid(tmp_path):
    plan, store = _run(tmp_path, "prefix_cache_entries = 0")
    with store:
        ledger = store.engagement(plan.hash, "bounded", TASK)
        assert {(e.hit_tokens, e.replayed_tokens) for e in ledger.values()} == {(0, 0)}
        [passes] = store.counters(plan.hash, "bounded")
        assert passes.delta()["replayed_tokens"] == 0
        assert all(e.trimmed for e in ledger.values())  # cold long prefills still trim
        analysis = analyze_run(store)
    replay = analysis.comparison("replay", TASK)
    # the candidate answers exactly like the baseline, so without the check it would PASS
    assert replay.comparison.paired.delta == 0.0
    assert replay.status == "INVALID" and analysis.variant_decisions["replay"] == "INVALID"
    assert ("did not engage: encoder_replay engaged on 0 of 6 items (6 known, 0 unknown)"
            in replay.verdict.reasons[0])
    assert analysis.decision == "INVALID"
    assert any("no prefix-cache hit" in n and "replay/" in n for n in analysis.notes)
