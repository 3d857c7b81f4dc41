"""Round trips through the results store: requests, responses, timings, scores, and the
tables the statistics read."""

from __future__ import annotations

import math

import pytest

from tasks.request import (
    ChatMessage,
    Generation,
    GenerationParams,
    Loglikelihoods,
    Request,
)
from validate.engines.base import Timings, TokenLogprob
from validate.store import (
    PlannedRequest,
    ResponseKey,
    ResponseRecord,
    ResultsStore,
    ScoreRecord,
    StoreError,
)

PLAN = "0123456789abcdef"
GEN = GenerationParams(max_gen_toks=256, until=("Question:", "\n\n"), seed=7)


def _gen_request(i: int, prompt: str | None = None) -> Request:
    return Request(task="gsm8k", item_id=f"gsm8k-{i}", kind="generate",
                   prompt=prompt or f"Question: {i} + {i} = ?\nAnswer:", gen=GEN)


@pytest.fixture
def store(tmp_path):
    with ResultsStore.open(tmp_path / "results.sqlite") as s:
        yield s


@pytest.fixture
def run(store):
    return store.begin_run(PLAN, plan_name="ab", seeds=(1234, 42), plan={"tasks": ["gsm8k"]},
                           identity={"git": "abc123", "torch": "2.13.0", "machine": "x86_64"})


def test_run_identity_round_trip(store, run):
    (stored,) = store.runs(PLAN)
    assert stored.git_sha == "abc123" and stored.seeds == (1234, 42)
    assert stored.identity["torch"] == "2.13.0" and stored.status == "running"
    store.finish_run(run)
    assert store.runs(PLAN)[0].status == "complete"
    assert store.runs("another plan") == []


def test_default_identity_records_the_environment(store):
    run = store.begin_run("p2")
    assert run.identity["python"] and "torch" in run.identity


def test_generation_with_timings_and_logprobs_round_trips(store, run):
    planned = PlannedRequest("bounded", 1, _gen_request(3))
    timings = Timings(started_at_s=1.7e9 + 0.25, e2e_s=1.5, ttft_s=0.3,
                      itl_s=(0.1, 0.2, 0.3, 0.25, 0.35), n_prompt_tokens=41, n_output_tokens=6)
    logprobs = (TokenLogprob(" 6", -0.125, ((" 6", -0.125), (" 7", -2.5))),
                TokenLogprob("\n", -1.0 / 3.0, ()))
    record = ResponseRecord(Generation(" 6\n", "stop", 6), timings, logprobs,
                            raw={"id": "cmpl-1", "choices": [{"text": " 6\n"}]}, attempts=2,
                            engine={"name": "openai", "concurrency": 8})
    assert store.put_response(run, planned, record)
    got = store.response(PLAN, planned.key)
    assert got.request == planned.request and got.record == record and got.run_id == run.run_id

    (row,) = store.timings(PLAN, "bounded", "gsm8k")
    assert (row.item_id, row.repeat, row.ttft_s, row.e2e_s) == ("gsm8k-3", 1, 0.3, 1.5)
    assert row.itl_s == (0.1, 0.2, 0.3, 0.25, 0.35)
    assert math.isclose(row.tpot_s, (1.5 - 0.3) / 5)  # (e2e - ttft) / (n_out - 1)
    assert row.engine == {"name": "openai", "concurrency": 8}


def test_chat_and_loglikelihood_round_trip(store, run):
    chat = Request(task="gpqa", item_id="rec42", kind="loglikelihood",
                   messages=(ChatMessage("system", "Be brief."), ChatMessage("user", "Q?")),
                   continuations=(" (A)", " (B)", " (C)", " (D)"))
    planned = PlannedRequest("base", 0, chat)
    record = ResponseRecord(Loglikelihoods((-1.25, -0.1 - 0.2, -7.0, float("-inf")),
                                           (False, True, False, False)))
    store.put_response(run, planned, record)
    got = store.response(PLAN, planned.key)
    assert got.request == chat and got.record.response == record.response
    assert got.record.timings is None


def test_pending_skips_answered_and_keeps_order(store, run):
    planned = [PlannedRequest(v, r, _gen_request(i)) for v in ("base", "fused")
               for i in range(4) for r in range(2)]
    assert store.pending(run, planned) == planned
    done = planned[1::3]
    for p in done:
        store.put_response(run, p, ResponseRecord(Generation("x", "stop", 1)))
    assert store.pending(run, planned) == [p for p in planned if p not in done]
    # a second run of the same plan (a resume) sees the same
    rerun = store.begin_run(PLAN, identity={"git": "abc123"})
    assert store.pending(rerun, planned) == [p for p in planned if p not in done]


def test_duplicate_response_keeps_the_first(store, run):
    planned = PlannedRequest("base", 0, _gen_request(1))
    assert store.put_response(run, planned, ResponseRecord(Generation("first", "stop", 1)))
    assert not store.put_response(run, planned, ResponseRecord(Generation("second", "stop", 1)))
    assert store.response(PLAN, planned.key).record.response.text == "first"


def test_changed_prompt_under_same_key_is_refused(store, run):
    store.pending(run, [PlannedRequest("base", 0, _gen_request(1))])
    changed = PlannedRequest("base", 0, _gen_request(1, prompt="Question: other\nAnswer:"))
    with pytest.raises(StoreError, match="gsm8k-1#0 .* different prompt"):
        store.pending(run, [changed])


def test_variant_config_conflict_is_refused(store, run):
    store.put_variant(run, "base", {"swa": "exact"}, is_baseline=True)
    store.put_variant(run, "base", {"swa": "exact"}, is_baseline=True)
    store.put_variant(run, "bounded", {"swa": "bounded"})
    assert [(v.name, v.is_baseline) for v in store.variants(PLAN)] == [
        ("base", True), ("bounded", False)]
    with pytest.raises(StoreError, match="'base'"):
        store.put_variant(run, "base", {"swa": "bounded"})


def test_scoring_needs_a_stored_response(store, run):
    key = ResponseKey("base", "gsm8k", "gsm8k-9", 0)
    with pytest.raises(StoreError, match="no stored response"):
        store.put_scores(PLAN, key, [ScoreRecord("strict-match", 1.0)], scorer="gsm8k@3")


def test_outcomes_table_covers_every_planned_item(store, run):
    planned = [PlannedRequest("base", r, _gen_request(i)) for i in range(3) for r in range(2)]
    store.pending(run, planned)
    texts = {0: "The answer is 0", 1: "", 2: "#### 4"}
    for p in planned[:-1]:  # the last (item 2, repeat 1) never gets a response
        i = int(p.request.item_id.split("-")[1])
        finish = "length" if i == 0 else "stop"
        store.put_response(run, p, ResponseRecord(Generation(texts[i], finish, 3 * i)))
    store.put_failure(run, planned[-1], "gsm8k/gsm8k-2: HTTP 400: prompt too long", attempts=1)
    for s in store.unscored(PLAN):
        i = int(s.key.item_id.split("-")[1])
        store.put_scores(PLAN, s.key, [
            ScoreRecord("strict-match", float(i == 2), "4" if i == 2 else None, invalid=i != 2),
            ScoreRecord("flexible-extract", float(i != 1), str(i) if i != 1 else None,
                        invalid=i == 1)], scorer="gsm8k@3")
    assert store.unscored(PLAN) == []

    assert store.cells(PLAN) == [("base", "gsm8k")]
    table = store.outcomes(PLAN, "base", "gsm8k")
    assert table.filters == ("flexible-extract", "strict-match")
    assert [(r.item_id, r.repeat, r.responded) for r in table.rows] == [
        ("gsm8k-0", 0, True), ("gsm8k-0", 1, True), ("gsm8k-1", 0, True), ("gsm8k-1", 1, True),
        ("gsm8k-2", 0, True), ("gsm8k-2", 1, False)]
    by_key = {(r.item_id, r.repeat): r for r in table.rows}
    assert by_key["gsm8k-2", 0].scores == {"strict-match": 1.0, "flexible-extract": 1.0}
    assert by_key["gsm8k-1", 1].invalid == {"strict-match": True, "flexible-extract": True}
    assert by_key["gsm8k-1", 0].output_chars == 0  # empty output is visible to health checks
    assert by_key["gsm8k-0", 0].finish_reason == "length"
    assert by_key["gsm8k-0", 0].extracted["flexible-extract"] == "0"
    missing = by_key["gsm8k-2", 1]
    assert missing.scores == {} and "prompt too long" in missing.failed
    assert missing.prompt_sha256 == planned[-1].request.prompt_sha256


def test_rescore_replaces_scores(store, run):
    p = PlannedRequest("base", 0, _gen_request(5))
    store.put_response(run, p, ResponseRecord(Generation("#### 10", "stop", 2)))
    store.put_scores(PLAN, p.key, [ScoreRecord("strict-match", 0.0, None, True)], "gsm8k@2")
    store.put_scores(PLAN, p.key, [ScoreRecord("strict-match", 1.0, "10", False)], "gsm8k@3")
    (row,) = store.outcomes(PLAN, "base", "gsm8k").rows
    assert row.scores == {"strict-match": 1.0} and row.extracted == {"strict-match": "10"}
