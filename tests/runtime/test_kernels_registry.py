"""The kernel registry: choice parsing, per-op selection once at construction, the
fallback that says so once, and forcing either path."""

from __future__ import annotations

import warnings

import pytest

from runtime.kernels import OP_NAMES, KernelRegistry, fused_by_op, normalise_choice
from runtime.kernels.errors import KernelChoiceError, KernelUnavailableError
from runtime.kernels.reference import REFERENCE_OPS


def test_base_words_select_every_op():
    assert fused_by_op("reference") == dict.fromkeys(OP_NAMES, False)
    assert fused_by_op("none") == dict.fromkeys(OP_NAMES, False)
    assert fused_by_op("fused") == dict.fromkeys(OP_NAMES, True)
    assert fused_by_op("all") == dict.fromkeys(OP_NAMES, True)


def test_per_op_list_starts_from_reference_unless_all():
    picked = fused_by_op(["+gate", "-mhc"])
    assert [n for n, f in picked.items() if f] == ["gate"]
    picked = fused_by_op(("all", "-attention", "-mhc"))
    assert {n for n, f in picked.items() if not f} == {"attention", "mhc"}
    assert fused_by_op("+gate, +indexer") == fused_by_op(["+gate", "+indexer"])
    # later entries win
    assert fused_by_op(["+gate", "-gate"])["gate"] is False


@pytest.mark.parametrize("bad", [["gate"], ["+nope"], ["*gate"], "+gate,-", [3]])
def test_bad_choices_name_the_entry(bad):
    with pytest.raises(KernelChoiceError, match="RuntimeOptions.kernels"):
        fused_by_op(bad)


def test_normalise_choice_is_hashable():
    assert normalise_choice(["+gate"]) == ("+gate",)
    assert normalise_choice("fused") == "fused"
    assert hash(normalise_choice("+gate,-mhc")) == hash(("+gate", "-mhc"))


def test_reference_registry_uses_the_reference_functions(recwarn):
    ops = KernelRegistry("reference", device="cpu")
    for name in OP_NAMES:
        assert getattr(ops, name) is REFERENCE_OPS[name]
        assert not ops.is_fused(name)
    assert not [w for w in recwarn if "kernels:" in str(w.message)]
    with pytest.raises(AttributeError, match="no op 'nope'"):
        ops.nope  # noqa: B018


def test_fallback_says_so_once_and_names_the_ops(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ops = KernelRegistry(["+gate", "+mhc"], device="cpu")
    messages = [str(w.message) for w in caught if "kernels:" in str(w.message)]
    assert len(messages) == 1
    assert "gate" in messages[0] and "mhc" in messages[0] and "reference" in messages[0]
    assert ops.selected["gate"] == "reference" and ops.gate is REFERENCE_OPS["gate"]


def test_error_mode_refuses_to_fall_back(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(KernelUnavailableError, match="gate"):
        KernelRegistry(["+gate"], device="cpu", on_unavailable="error")


def test_interpreter_makes_fused_runnable_on_cpu(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    ops = KernelRegistry(["all", "-attention"], device="cpu", on_unavailable="error")
    assert ops.is_fused("gate") and ops.is_fused("mhc") and not ops.is_fused("attention")
    assert ops.describe()["gate"] == "fused (interpret)"
    assert ops.attention is REFERENCE_OPS["attention"]


def test_two_registries_coexist(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    fused = KernelRegistry("fused", device="cpu")
    ref = KernelRegistry("reference", device="cpu")
    assert fused.is_fused("gate") and not ref.is_fused("gate")


def test_runtime_options_take_the_registry_choices():
    from runtime.errors import ConfigError
    from runtime.options import RuntimeOptions

    assert RuntimeOptions(kernels=["+gate", "-mhc"]).kernels == ("+gate", "-mhc")
    assert RuntimeOptions(kernels="fused").kernels == "fused"
    with pytest.raises(ConfigError, match="unknown op 'gat'"):
        RuntimeOptions(kernels=["+gat"])


def test_model_without_a_kernel_backend_falls_back_once(monkeypatch):
    """A CPU model asked for fused kernels without the interpreter runs the reference and
    warns once, at construction (not per forward)."""
    import torch

    from runtime.config import V41Config
    from runtime.model import SeqChunk, V41Model
    from runtime.options import RuntimeOptions
    from runtime.weights import V41Weights

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    config = V41Config.preset("tiny").replace(num_hidden_layers=8, compress_ratios=(0, 0, 2, 2, 2, 1, 1, 1),
                                              kv_source_layer_ids=(2, 5), index_source_layer_ids=(2, 5, 6),
                                              candidate_source_layer_id=5, engram_layer_ids=(1,))
    weights = V41Weights.random(config, seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = V41Model(weights, RuntimeOptions(kernels=["+gate", "+attention"]))
        model.forward([SeqChunk(model.new_state(), torch.arange(5))])
        model.forward([SeqChunk(model.new_state(), torch.arange(3))])
    notes = [str(w.message) for w in caught if "kernels:" in str(w.message)]
    assert len(notes) == 1 and "gate" in notes[0] and "attention" in notes[0]
    assert set(model.ops.selected.values()) == {"reference"}


def test_interpreter_refused_when_triton_was_imported_compiled():
    """A process that imported triton before setting TRITON_INTERPRET cannot interpret
    kernels (triton's library functions are compiled ones): the backend says so and
    the registry falls back instead of failing inside a kernel."""
    import subprocess
    import sys

    code = (
        "import os, triton.language\n"
        "os.environ['TRITON_INTERPRET'] = '1'\n"
        "from runtime.kernels.backend import Backend\n"
        "b = Backend.detect('cpu')\n"
        "print(b.mode, '|', b.reason)\n"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env=env, check=True).stdout.strip()
    mode, reason = (s.strip() for s in out.split("|"))
    assert mode == "none"
    assert "imported before TRITON_INTERPRET=1" in reason


def test_interpreter_refuses_bfloat16_and_runs_float32(monkeypatch):
    """Triton's interpreter runs bf16 arithmetic and tl.dot on the uint16 bit patterns:
    an interpreted fused op on bf16 would report garbage as the kernel's quality loss."""
    import torch

    from runtime.kernels.backend import Backend

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    if Backend.detect("cpu").mode != "interpret":
        pytest.skip("triton was imported without TRITON_INTERPRET=1 in this process")
    with pytest.raises(KernelUnavailableError, match="bfloat16 on its bit patterns"):
        KernelRegistry(["+gate"], device="cpu", dtype=torch.bfloat16, on_unavailable="error")
    ops = KernelRegistry(["+gate"], device="cpu", dtype=torch.float32, on_unavailable="error")
    assert ops.describe()["gate"] == "fused (interpret)"

    from validate.plan.fused import fused_availability

    refused = fused_availability("cpu", allow_interpreter=True, dtype="bfloat16")
    assert refused.ops == () and "bfloat16" in refused.reason and "fused_gate" in refused.skipped
    assert "gate" in fused_availability("cpu", allow_interpreter=True, dtype="float32").ops
