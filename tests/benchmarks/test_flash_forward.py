"""benchmarks/flash_forward.py: bad flags are one line and exit 2 before any weights are
built; its check (warm after a prefix hit vs chunked and one-shot cold prefills, through
the engine) holds on a small CPU model and catches a different prompt; and, with CUDA,
the same check at the flash dimensions on two layers (flash 1 and 14: window only and
ratio 2, both with Engram), reference and fused kernels."""

from __future__ import annotations

import pytest
import torch

from benchmarks.flash_forward import (
    FlashForward,
    _generate,
    compare,
    main,
    problem,
    prompts,
    run,
    run_variant,
    weight_bytes,
)
from runtime.config import V41Config
from runtime.engine.engine import Engine, EngineConfig
from runtime.model import V41Model
from runtime.options import RuntimeOptions
from runtime.weights import V41Weights


@pytest.mark.parametrize(("argv", "message"), [
    (["--prefix", "1000", "--chunk", "512"], "--prefix: 1000 is not a multiple of --chunk 512"),
    (["--steps", "0"], "--steps: expected >= 1, got 0"),
    (["--layers", "1,x"], "--layers: expected comma-separated layer ids, got '1,x'"),
    (["--layers", "1,3"], "--layers: layer 3 reads the compressed KV of layer 2, which is not kept"),
    (["--layers", "20,24"], "--layers: 20,24 keeps no Engram layer (flash: 1, 14)"),
    (["--layers", "1,14", "--engram-vocab-size", "1"], "--engram-vocab-size: expected an integer >= 2"),
    (["--device", "cuda:7"], "--device: 'cuda:7' "),
    (["--experts", "0", "--device", "cpu"], "--experts: expected >= 1, got 0"),
])
def test_bad_flags_are_one_line_and_exit_2(argv, message, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"flash_forward.py: {message}") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_the_memory_arithmetic_is_what_the_weights_allocate():
    """The module doc's figures, by hand, against the tensors V41Weights allocates (meta
    device, all 384 experts), and the model with the stand-in token map builds on them."""
    from runtime.engram_map import case_fold_token_map

    config = FlashForward().config()
    weights = V41Weights(config, dtype=torch.bfloat16, device="meta")
    allocated = sum(p.numel() * p.element_size() for p in weights.parameters())
    wb = weight_bytes(config)
    assert wb["total"] == allocated
    assert wb["routed_experts"] == 4 * 384 * 3 * 2304 * 5120 * 2
    assert wb["engram_tables"] == (8_404_462 + 8_413_084) * 256 * 2
    assert wb["embed_head"] == 2 * 129_280 * 5120 * 2
    assert round(wb["total"] / 2**30, 1) == 113.6 and round(wb["other"] / 2**30, 2) == 1.87
    weights.engram_token_map = case_fold_token_map(config)
    model = V41Model(weights)
    assert model.hasher.primes.shape == (2, 3, 8) and int(model.hasher.pad_id) == config.engram_pad_id


@pytest.fixture(scope="module")
def testbed_weights() -> V41Weights:
    return V41Weights.random(V41Config.preset("testbed"), seed=0)


def test_the_check_holds_on_a_cpu_model_and_can_fail(testbed_weights, one_thread):
    # testbed: window 32, ratios 0/2/1/1 with Engram; P spans several windows and chunks.
    s = FlashForward(prefix=96, suffix=40, chunk=32, steps=3, device="cpu")
    a, b = prompts(s, testbed_weights.config.vocab_size)
    assert a[:96] == b[:96] and a[96] != b[96]
    for numerics in ("invariant", "fast"):
        row = run_variant(testbed_weights, "reference", numerics, s, a, b)
        assert row["hit_tokens_counted"] == row["hit_tokens_request"] == 96
        assert row["fed_tokens_warm"] == len(b) - 96
        assert all(row["checks"].values()) and len(row["checks"]) == (3 if numerics == "invariant" else 2)
    # compare() sees a difference: B against B with its last token changed.
    engine = Engine(V41Model(testbed_weights, RuntimeOptions(batch_invariant=True)),
                    config=EngineConfig(prefix_cache_entries=0))
    first, _ = _generate(engine, b, 3, "cpu")
    second, _ = _generate(engine, b[:-1] + [(b[-1] + 1) % 500 + 3], 3, "cpu")
    assert compare(first, first)["bitwise"]
    assert not compare(first, second)["bitwise"] and compare(first, second)["max_rel_diff"] > 0


def test_a_variant_that_raises_is_recorded_and_fails_the_verdict(monkeypatch):
    """run() without the flash build: one variant passes, one raises; the run goes on,
    each partial document is handed out, and the note names the error."""
    import benchmarks.flash_forward as ff

    def fake_variant(weights, kernels, numerics, s, a, b):
        if kernels == "fused":
            raise RuntimeError("boom\nsecond line")
        same = {"bitwise": True, "max_rel_diff": 0.0, "tokens_equal": True}
        times = {"ttft_s": 1.0, "total_s": 1.0}
        return {"kernels": kernels, "numerics": numerics, "hit_tokens_counted": s.prefix,
                "warm_vs_cold_chunked": same, "warm_vs_cold_one_shot": same, "cold_one_shot": times,
                "cold_chunked": times, "warm": times, "checks": {"warm_equals_chunked_cold_bitwise": True}}

    monkeypatch.setattr(ff, "build_weights", lambda s, config: (None, {"weights_init_s": 0.0, "token_map_s": 0.0}))
    monkeypatch.setattr(ff, "run_variant", fake_variant)
    seen = []
    doc = ff.run(FlashForward(numerics=("fast",), device="cpu"), on_variant=lambda d: seen.append(d["passed"]))
    assert seen == [True, False] and not doc["passed"]
    assert doc["variants"][1] == {"kernels": "fused", "numerics": "fast", "error": "RuntimeError: boom"}
    doc.update(environment=ff.environment("cpu"), command="c")
    note = ff.markdown(doc)
    assert "| fused | fast | ERROR RuntimeError: boom |" in note and "Verdict: FAIL (2 of 2 variants run)" in note


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_flash_dimensions_two_layers_hit_equals_cold_on_the_gpu(record_property):
    s = FlashForward(layers=(1, 14), engram_vocab_size=20_000, prefix=1024, suffix=512, chunk=512, steps=2,
                     numerics=("invariant",), device="cuda")
    assert problem(s) is None
    try:
        doc = run(s)
    finally:
        torch.cuda.empty_cache()
    record_property("flash_forward", doc["variants"])
    for row in doc["variants"]:
        assert "skipped" not in row, row
        assert row["hit_tokens_counted"] == 1024, row
        assert all(row["checks"].values()), row
    assert doc["passed"]
