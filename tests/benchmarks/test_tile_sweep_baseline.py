"""benchmarks/tile_sweep.py's ``--baseline``: an earlier revision's kernel module, loaded from
a folder, is its own op (not the current module's class) and computes what it computed.
Here the "earlier revision" is a copy of the current file with the tile default changed,
so the test can tell the two apart; interpreted, both agree with the reference."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from benchmarks.tile_sweep import baseline_ops, main
from runtime.kernels import rope_quant
from runtime.kernels.reference import REFERENCE_OPS

REPO_FILE = rope_quant.__file__


def test_a_copied_module_is_loaded_as_its_own_op(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    text = Path(REPO_FILE).read_text()
    marker = "TILE_ELEMENTS = 1024"
    assert marker in text
    (tmp_path / "rope_quant.py").write_text(text.replace(marker, "TILE_ELEMENTS = 512", 1))
    ops = baseline_ops(tmp_path)
    assert set(ops) == {"rope_quant"}  # no inv_rope.py in the folder
    assert baseline_ops(tmp_path, ("mhc", "gate")) == {}  # rope_quant not asked for: not imported
    [(label, op)] = ops["rope_quant"]
    assert label == "baseline"
    assert type(op) is not rope_quant.FusedRopeQuant and type(op).__name__ == "FusedRopeQuant"
    assert op.tile(128) == 512 and rope_quant.FusedRopeQuant().tile(128) == 1024  # narrow vectors: TILE_ELEMENTS
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(5, 512, generator=gen)
    ang = torch.randn(5, 32, generator=gen)
    got = op(x, ang.cos(), ang.sin(), "nvfp4")
    want = REFERENCE_OPS["rope_quant"](x, ang.cos(), ang.sin(), "nvfp4")
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_several_folders_are_each_their_own_labelled_op(tmp_path, monkeypatch):
    """Steps of one rewrite timed in one run: each folder's module is loaded apart and keeps
    its own setting, labelled by its folder."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    text = Path(REPO_FILE).read_text()
    marker = "TILE_ELEMENTS = 1024"
    for name, tile in (("a", 512), ("b", 256)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "rope_quant.py").write_text(text.replace(marker, f"TILE_ELEMENTS = {tile}", 1))
    ops = baseline_ops([tmp_path / "a", tmp_path / "b"], ("rope_quant",))
    assert [label for label, _ in ops["rope_quant"]] == ["baseline a", "baseline b"]
    assert [op.tile(128) for _, op in ops["rope_quant"]] == [512, 256]


def test_a_copied_compress_module_is_a_compress_baseline(tmp_path, monkeypatch):
    """compress.py is read as the pooling + norm op's baseline, with its own tile."""
    from runtime.kernels import compress

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    text = Path(compress.__file__).read_text()
    marker = "TILE_ELEMENTS = 512"
    assert marker in text
    (tmp_path / "compress.py").write_text(text.replace(marker, "TILE_ELEMENTS = 1024", 1))
    [(label, op)] = baseline_ops(tmp_path, ("compress",))["compress"]
    assert label == "baseline" and type(op) is not compress.FusedPoolNorm and op.tile_elements == 1024
    gen = torch.Generator().manual_seed(5)
    kv, gate = torch.randn(8, 64, generator=gen), torch.randn(8, 64, generator=gen)
    weight = torch.randn(64, generator=gen)
    args = (kv, gate, 2, weight, 1e-6, torch.float32)
    torch.testing.assert_close(op(*args), REFERENCE_OPS["compress"](*args), rtol=1e-6, atol=1e-6)


def test_no_folder_means_no_baseline(tmp_path):
    assert baseline_ops(None) == {}
    assert baseline_ops(tmp_path) == {}


def test_a_missing_baseline_folder_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--baseline", str(tmp_path / "nope"), "--out", str(tmp_path)])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(f"--baseline {tmp_path / 'nope'}: not a folder")


def test_an_earlier_gate_is_loaded_as_its_own_op(tmp_path, monkeypatch):
    """benchmarks/gate_tiles.py's ``--baseline``: gate.py from a folder is a FusedGate of its
    own, here with the top-k rounds' packed key broken (the expert in its low bits as it
    is, not reversed, so a tie goes to the higher expert), and the reference tells the two
    apart."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from runtime.config import V41Config
    from runtime.kernels import gate
    from runtime.numerics import Numerics

    text = Path(gate.__file__).read_text()
    marker = "packed = (key << 32) | (E_PAD - 1 - ecols).to(tl.int64)[None, :]"
    assert marker in text
    (tmp_path / "gate.py").write_text(text.replace(marker, "packed = (key << 32) | ecols.to(tl.int64)[None, :]", 1))
    [(label, op)] = baseline_ops(tmp_path)["gate"]
    assert label == "baseline" and type(op) is not gate.FusedGate and type(op).__name__ == "FusedGate"
    config = V41Config.preset("tiny").replace(n_routed_experts=16, num_experts_per_tok=2)
    x = torch.ones(1, 32)
    w = torch.zeros(16, 32)
    w[[3, 9]] = 1.0  # experts 3 and 9 tie at the top
    bias = torch.zeros(16)
    args = (x, w, bias, config, Numerics())
    want = REFERENCE_OPS["gate"](*args)[1]
    assert torch.equal(gate.FusedGate()(*args)[1], want)  # today's: the lower expert first
    assert not torch.equal(op(*args)[1], want)  # the broken copy: the tie the other way round


def test_only_keeps_the_named_variants_in_order():
    from benchmarks.tile_sweep import chosen

    variants = [("default", 1), ("tile 512 w4", 2), ("whole vectors below 512", 3)]
    assert chosen(variants, None) == variants
    assert chosen(variants, ("whole vectors below 512", "default")) == [variants[0], variants[2]]
    assert chosen(variants, ("no such label",)) == []
