"""The plan runner against a real loopback OpenAI-compatible server: resume without
recomputing, coverage accounting with permanent failures, warm priming, exit codes."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from validate.analysis import analyze_run
from validate.plan import load_plan
from validate.progress import Event, Recorder
from validate.runner import run_plan
from validate.store import ResultsStore

HERE = Path(__file__).parent
TASK = "gsm8k"
LIMIT = 24


def _load_server_module():
    name = "v41val_runner_test_server"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / "test_runner_server.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


srv = _load_server_module()


@pytest.fixture(scope="module")
def server():
    s = srv.RunnerServer().start()
    srv.load_golds(s.state, [TASK], LIMIT)
    yield s
    s.stop()


def write_plan(tmp_path: Path, server, variants: dict[str, str], baseline: str,
               policy: str = "", **kw) -> Path:
    path = tmp_path / "plan.toml"
    path.write_text(srv.plan_text(server.base_url, variants, baseline, [TASK], LIMIT, policy, **kw))
    return path


def prompts(limit: int = LIMIT) -> list[str]:
    import tasks

    task = tasks.get(TASK)
    return [task.render(item).prompt for item in task.items()[:limit]]


class StopAfter(Exception):
    pass


class RecordingFactory:
    """The plan's own openai factory, counting the outcomes each engine delivered."""

    kind = "openai"

    def __init__(self, plan) -> None:
        from validate.runner.engines import OpenAIFactory

        self.inner = OpenAIFactory(plan)
        self.delivered: dict[str, int] = {}

    @contextlib.contextmanager
    def open(self, variant):
        with self.inner.open(variant) as engine:
            yield _Recording(engine, self.delivered, variant.name)


class _Recording:
    name = "recording"

    def __init__(self, engine, counts: dict, variant: str) -> None:
        self.engine, self.counts, self.variant = engine, counts, variant

    async def stream(self, requests):
        async for outcome in self.engine.stream(requests):
            self.counts[self.variant] = self.counts.get(self.variant, 0) + 1
            yield outcome

    async def aclose(self) -> None:
        await self.engine.aclose()


def test_resume_after_interruption_never_recomputes(tmp_path, server):
    plan = load_plan(write_plan(tmp_path, server, {"base": "acc60", "cand": "acc40"}, "base",
                                concurrency=2))
    store = ResultsStore.open(tmp_path / "results.sqlite")
    calls_at_start = dict(server.state.calls)  # the module's server also answered earlier tests

    class Interrupt(Recorder):
        def seen(self, event: Event) -> None:
            if event.kind == "move" and event.label == "cand: quality" and event.done == 7:
                raise StopAfter  # as a kill would: mid-variant, requests still in flight

    factory = RecordingFactory(plan)
    with pytest.raises(StopAfter):
        run_plan(plan, store, progress=Interrupt(), factory=factory)
    delivered_not_stored = factory.delivered["cand"] - 7
    stored_first = {s.key.item_id for s in store.responses(plan.hash, "cand")}
    assert len(stored_first) == 7 and len(store.responses(plan.hash, "base")) == LIMIT
    calls_before = dict(server.state.calls)

    outcome = run_plan(plan, store)
    stats = {s.variant: s for s in outcome.variants}
    assert stats["base"].sent == 0 and stats["base"].already_stored == LIMIT
    assert stats["cand"].already_stored == 7 and stats["cand"].sent == LIMIT - 7
    # per prompt: the server saw every stored response exactly once over both runs, and
    # the second run asked only for what the first did not store
    by_prompt = {p: i for i, p in enumerate(prompts())}

    def calls(model: str, prompt: str, since: dict) -> int:
        return server.state.calls.get((model, prompt), 0) - since.get((model, prompt), 0)

    for prompt in by_prompt:
        assert calls("acc60", prompt, calls_at_start) == 1
        assert calls("acc40", prompt, calls_before) in (0, 1)
    cand = {s.key.item_id: s for s in store.responses(plan.hash, "cand")}
    assert len(cand) == LIMIT and not store.unscored(plan.hash)
    lost = sum(calls("acc40", p, calls_at_start) - 1 for p in by_prompt)
    # lost: requests in flight at the interruption, or answered and not yet written
    assert 0 <= lost <= plan.concurrency + delivered_not_stored
    runs = store.runs(plan.hash)
    assert [r.status for r in runs] == ["failed", "complete"]
    assert runs[0].identity["python"] and runs[0].seeds == (plan.seed,)
    assert runs[0].identity["hardware"]["cpu_count"] >= 1 and runs[0].identity["engine"] == "openai"
    assert "git" in runs[0].identity and "torch" in runs[0].identity
    assert runs[0].plan_hash == runs[1].plan_hash == plan.hash
    store.close()


def test_coverage_accounts_for_permanent_failures(tmp_path, server):
    plan = load_plan(write_plan(tmp_path, server, {"base": "acc60", "flaky": "flaky60"}, "base"))
    store = ResultsStore.open(tmp_path / "results.sqlite")
    outcome = run_plan(plan, store)
    refused = sorted(f"{item.id}#0" for item, p in zip(_items(), prompts(), strict=True)
                     if srv.bucket(p) % 4 == 0)
    assert refused, "the sample must contain refused prompts"
    assert outcome.failed == len(refused)
    analysis = analyze_run(store)
    facts = analysis.summary("flaky", TASK).health
    assert sorted(facts.missing) == refused and sorted(facts.failed) == refused
    assert facts.planned == LIMIT and facts.responded == LIMIT - len(refused)
    row = analysis.comparison("flaky", TASK)
    assert row.health.coverage == pytest.approx((LIMIT - len(refused)) / LIMIT)
    assert row.status == "INVALID" and any("coverage" in r for r in row.health_failures)
    assert analysis.decision == "INVALID" and analysis.exit_code == 4
    assert store.runs(plan.hash)[-1].status == "incomplete"
    # a rerun retries exactly the failed requests, and nothing else
    before = server.state.calls_of("flaky60")
    run_plan(plan, store)
    assert server.state.calls_of("flaky60") - before == len(refused)  # a 400 is not retried
    store.close()


def _items():
    import tasks

    return tasks.get(TASK).items()[:LIMIT]


def test_empty_outputs_make_a_variant_invalid_not_failing(tmp_path, server):
    policy = '[policy]\ntasks.gsm8k = { margin = 5.0, metric = "exact_match,strict-match" }\n'
    plan = load_plan(write_plan(tmp_path, server, {"base": "acc60", "empty": "empty"}, "base",
                                policy))
    store = ResultsStore.open(tmp_path / "results.sqlite")
    run_plan(plan, store)
    analysis = analyze_run(store)
    row = analysis.comparison("empty", TASK)
    assert row.verdict.verdict == "INVALID" and row.status == "INVALID"
    assert any("empty-output rate 100.00 %" in r for r in row.verdict.reasons)
    assert analysis.decision == "INVALID" and analysis.variant_decisions == {"empty": "INVALID"}
    assert analysis.summary("empty", TASK).health.empty_rate == 1.0
    store.close()


def test_run_cli_exit_code_is_the_decision(tmp_path, server, capsys):
    from v41val.cli import main

    policy = '[policy]\ntasks.gsm8k = { margin = 20.0, metric = "exact_match,strict-match" }\n'
    def run(variants: dict[str, str]) -> tuple[int, dict]:
        path = write_plan(tmp_path, server, variants, "base", policy)
        try:
            main(["run", str(path), "--workspace", str(tmp_path / "ws"), "--json"])
            code = 0
        except SystemExit as exc:
            code = exc.code
        return code, json.loads(capsys.readouterr().out)

    code, doc = run({"base": "acc60", "same": "acc60"})
    assert doc["decision"] == "GO" and code == 0 == doc["exit_code"]
    code, doc = run({"base": "acc60", "worse": "acc0"})
    assert doc["decision"] == "NO-GO" and code == 1 == doc["exit_code"]
    code, doc = run({"base": "acc60", "empty": "empty"})
    assert doc["decision"] == "INVALID" and code == 4 == doc["exit_code"]


def test_warm_mode_primes_each_pending_prompt_once(tmp_path, server):
    text = srv.plan_text(server.base_url, {"base": "acc70", "cand": "acc65"}, "base", [TASK], 6)
    path = tmp_path / "plan.toml"
    path.write_text(text.replace('concurrency = 4\n', 'concurrency = 4\nwarm = true\n'))
    plan = load_plan(path)
    assert plan.warm
    with ResultsStore.open(tmp_path / "results.sqlite") as store:
        run_plan(plan, store)
        for prompt in prompts(6):  # one priming call (1 token) + one measured call
            assert server.state.calls[("acc70", prompt)] == 2
            assert server.state.calls[("acc65", prompt)] == 2
        stored = store.responses(plan.hash)
        assert len(stored) == 12 and all(s.record.response.text for s in stored)
        run_plan(plan, store)  # nothing pending: nothing primed, nothing sent
        assert all(server.state.calls[("acc70", p)] == 2 for p in prompts(6))


def test_repeats_are_paired_and_clustered_by_item(tmp_path, server):
    text = srv.plan_text(server.base_url, {"base": "acc60", "cand": "acc50"}, "base", [TASK], 8)
    path = tmp_path / "plan.toml"
    path.write_text(text.replace("limit = 8\n", "limit = 8\nrepeats = 3\n"))
    plan = load_plan(path)
    with ResultsStore.open(tmp_path / "results.sqlite") as store:
        run_plan(plan, store)
        requests = [s.request for s in store.responses(plan.hash, "base")]
        assert sorted({r.gen.seed for r in requests}) == [0, 1, 2]  # seed + repeat
        analysis = analyze_run(store)
    s = analysis.summary("cand", TASK)
    assert (s.n, s.accuracy.n_items, s.accuracy.n_rows) == (24, 8, 24)
    assert s.accuracy.se_clustered is not None
    row = analysis.comparison("cand", TASK)
    assert row.comparison.paired.repeated and row.comparison.outcomes.n_items == 8


def test_an_unreachable_variant_is_invalid_with_every_item_missing(tmp_path, server):
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    text = srv.plan_text(server.base_url, {"base": "acc60"}, "base", [TASK], 5)
    text += f'\n[variants.down]\nbase_url = "http://127.0.0.1:{dead}/v1"\nmodel = "acc60"\n'
    path = tmp_path / "plan.toml"
    path.write_text(text)
    plan = load_plan(path)
    with ResultsStore.open(tmp_path / "results.sqlite") as store:
        outcome = run_plan(plan, store)
        analysis = analyze_run(store)
    assert outcome.failed == 5
    down = analysis.summary("down", TASK)
    assert down.accuracy is None and down.n == 0 and len(down.health.missing) == 5
    assert all(m.endswith("#0") for m in down.health.failed) and len(down.health.failed) == 5
    row = analysis.comparison("down", TASK)
    assert row.comparison is None and row.status == "INVALID"
    assert any("coverage 0.00 %" in r for r in row.health_failures)
    assert analysis.decision == "INVALID"
