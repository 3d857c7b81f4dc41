"""``run --ablate`` says what it will do before it starts: its variants, the fused
variants it leaves out on a device that cannot run them fused (and why), and an
estimated time from the plan's own prompt tokens.

References: the op names from the kernel table (``runtime.kernels.ops``), prompt tokens
counted here from the tasks' rendered items with the testbed's tokenizer, the sweep's
tokens from the plan file's numbers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import tasks
from runtime import testbed
from runtime.kernels.backend import Backend
from runtime.kernels.ops import OP_NAMES
from runtime.tokenizer_file import load_tokenizer
from validate.errors import ValidateInputError
from validate.runner.execute import prepare
from validate.runner.preview import COSTS, ablation_preview

PLAN = "validate/plan/examples/tiny-ab.toml"


@pytest.fixture()
def no_cuda(monkeypatch):
    monkeypatch.setattr(Backend, "detect", classmethod(
        lambda cls, device, dtype=None: cls("none", "no CUDA device for tensors on cpu")))


def test_a_cpu_ablation_leaves_the_fused_variants_out_and_says_so(no_cuda):
    plan = prepare(PLAN, ablate=True)
    assert plan.variant_names == ("reference", "encoder_replay", "decoder_trim", "all_on")
    assert plan.variant("all_on").options.kernels == "reference"
    preview = ablation_preview(plan)
    assert preview.fused.skipped == tuple(f"fused_{op}" for op in OP_NAMES)
    lines = preview.lines()
    assert lines[0] == "--ablate: 4 variants: reference, encoder_replay, decoder_trim, all_on"
    assert lines[1].startswith("left out: " + ", ".join(f"fused_{op}" for op in OP_NAMES))
    assert "not available on this device (cpu): no CUDA device" in lines[1]


def test_a_device_that_runs_fused_kernels_gets_one_variant_per_op(monkeypatch):
    monkeypatch.setattr(Backend, "detect", classmethod(lambda cls, device, dtype=None: cls("cuda")))
    plan = prepare(PLAN, ablate=True)
    assert plan.variant_names == ("reference", "encoder_replay", "decoder_trim",
                                  *(f"fused_{op}" for op in OP_NAMES), "all_on")
    assert plan.variant("all_on").options.kernels == "all"
    preview = ablation_preview(plan)
    assert preview.fused.skipped == () and not any(
        line.startswith("left out") for line in preview.lines())


def test_the_estimate_counts_the_plans_tokens_per_phase(no_cuda):
    plan = prepare(PLAN, ablate=True)
    tokenizer = load_tokenizer(testbed.testbed_dir() / "tokenizer.json")
    prompt = fidelity = 0
    for name in ("testbed_lookup", "testbed_arith", "testbed_lookup_arith"):
        task = tasks.get(name)
        counts = [len(tokenizer.encode(task.render(item).prompt)) for item in task.items()[:100]]
        prompt += sum(counts)
        fidelity += sum(counts[:16]) + 16 * 32  # fidelity_prompts = 16, fidelity_tokens = 32
    sweep = 4 * 8 * (128 + 32)  # [speed]: 4 levels x 8 requests x (prompt + output)
    preview = ablation_preview(plan)
    assert (preview.prompt_tokens, preview.sweep_tokens, preview.fidelity_tokens) == (
        prompt, sweep, fidelity)
    cost = COSTS[("testbed", "cpu")]
    expected = 4 * (prompt * cost.prompt + sweep * cost.sweep) + 3 * fidelity * cost.fidelity
    assert preview.seconds == pytest.approx(expected)
    assert f"per variant {prompt:,} prompt tokens" in preview.lines()[-1]
    assert preview.lines()[-1].startswith(f"estimated time: about {expected / 60:.0f} min")


def test_no_estimate_where_no_cost_was_measured(tmp_path, no_cuda):
    text = Path(PLAN).read_text(encoding="utf-8").replace('preset = "testbed"', 'preset = "micro"')
    path = tmp_path / "micro.toml"
    path.write_text(text)
    preview = ablation_preview(prepare(path, ablate=True))
    assert preview.seconds is None
    assert preview.lines()[-1].startswith("estimated time: unknown (")
    assert "no cost per token measured for preset micro on cpu" in preview.lines()[-1]


def test_the_cli_prints_the_preview_before_any_work(monkeypatch, capsys, tmp_path, no_cuda):
    import validate.runner.execute as execute_module
    from v41val.cli import main

    def refuse(plan, **kwargs):
        assert "estimated time" in capsys.readouterr().err  # already printed
        raise ValidateInputError("stopped by the test before any work")

    monkeypatch.setattr(execute_module, "execute", refuse)
    with pytest.raises(SystemExit) as info:
        main(["run", PLAN, "--ablate", "--workspace", str(tmp_path)])
    assert info.value.code == 2
    assert not (tmp_path / "results.sqlite").exists()
