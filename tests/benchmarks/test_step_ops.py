"""benchmarks/step_ops.py: the op tally against hand-counted profiles, and its flag errors.

The profiled functions below are small enough to enumerate by hand: which aten ops they
call, which of them compute or copy, which are views or no-op casts.
"""

from __future__ import annotations

import pytest
import torch

from benchmarks import step_ops


def profiled(fn):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return prof.events()


def test_views_and_no_op_casts_are_not_work_but_real_copies_are():
    x = torch.randn(4, 6)

    def body():
        y = x.float()  # no-op cast: 0
        y = y.reshape(24).view(4, 6).t()  # views: 0
        y = y.contiguous()  # a copy (t() is not contiguous): 1
        y = (y * 2.0).double()  # mul 1, a real cast 1
        torch.zeros(3)  # one fill: 1

    counts = step_ops.tally(profiled(body), n_layers=0)
    assert counts["work_ops"] == 4
    assert counts["work_by_name"] == {"aten::contiguous": 1, "aten::mul": 1, "aten::to": 1, "aten::zeros": 1}
    assert counts["top_level_ops"] == 8  # to, reshape, view, t, contiguous, mul, to, zeros
    assert counts["per_layer"] == {"outside layers": 4}


def test_layers_and_registry_calls_are_attributed():
    x = torch.randn(8)
    op = step_ops._ranged("registry gate", lambda t: (t.exp() + 1).sum())  # three ops inside

    def body():
        with torch.profiler.record_function("layer 0"):
            op(x)
            x.neg()
        with torch.profiler.record_function("layer 1"):
            x.abs()

    counts = step_ops.tally(profiled(body), n_layers=2)
    assert counts["work_ops"] == 5
    assert counts["registry_calls"] == {"gate": 1}
    assert counts["fused_view_ops"] == 3  # the registry call as one op, neg, abs
    assert counts["per_layer"] == {"layer 0": 4, "layer 1": 1, "outside layers": 0}
    assert counts["fused_view_per_layer"] == {"layer 0": 2, "layer 1": 1, "outside layers": 0}


def test_the_layer_ranges_cover_every_layer_of_a_step():
    step = step_ops.build_step("testbed", batch=2, max_len=16, kernels="reference", invariant=False,
                               device=torch.device("cpu"))
    counts = step_ops.count_step(step, 2)
    layers = [v for k, v in counts["fused_view_per_layer"].items() if k.startswith("layer ")]
    assert len(layers) == step.config.num_hidden_layers and min(layers) > 0
    assert sum(counts["fused_view_per_layer"].values()) == counts["fused_view_ops"]
    assert counts["registry_calls"]["mhc"] == 2 * step.config.num_hidden_layers
    # Every layer's window KV goes through rope_quant (the step's own handle on it too).
    assert counts["registry_calls"]["rope_quant"] >= step.config.num_hidden_layers
    # The profiling wrappers are gone again: the step runs as it was built.
    assert "_layer" not in vars(step)
    assert not any(isinstance(fn, step_ops._ranged) for fn in step.ops._impls.values())
    assert step.quant is step.ops.rope_quant


@pytest.mark.parametrize("argv, needle", [
    (["--kernels", "fused"], "--kernels fused needs --device cuda"),
    (["--batches", "0"], "--batches"),
])
def test_bad_flags_are_one_line_errors(argv, needle, capsys):
    assert step_ops.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err
