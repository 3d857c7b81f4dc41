"""benchmarks/decode.py's KV-storage parts that run without a GPU: the roofline's bytes
per storage (against the formats' sizes written out by hand), which variants a
``--kv-storage`` list plans, and flags it cannot honour (one stderr line, exit 2, before
any weights are built)."""

from __future__ import annotations

import pytest

from benchmarks.decode import main, plan_variants, runs_as, step_bytes
from runtime.config import V41Config


@pytest.mark.parametrize("preset", ["mid", "flash"])
def test_packed_roofline_counts_the_formats_bytes(preset):
    """Per layer: W window rows, min(entries, top-k) selected entries for ratio > 0; a
    window row is 2 hd bytes in bf16 or hd + hd/32 packed (e4m3 + one ue8m0 per 32), an
    entry 2 hd or hd/2 + hd/16 (two e2m1 per byte + one e4m3 per 16). Everything else
    (weights, indexer keys, Engram rows) is the same for both."""
    c = V41Config.preset(preset)
    context = 4 * c.sliding_window
    deq, packed = step_bytes(c, 8, context), step_bytes(c, 8, context, "packed")
    hd = c.head_dim
    saved = 0
    for layer in range(c.num_hidden_layers):
        saved += c.sliding_window * (2 * hd - (hd + hd // 32))
        if c.compress_ratios[layer]:
            selected = min(context // c.compress_ratios[layer], c.index_topk)
            saved += selected * (2 * hd - (hd // 2 + hd // 16))
    assert deq["kv_per_request"] - packed["kv_per_request"] == saved
    assert deq["total"] - packed["total"] == 8 * saved
    assert deq["weights"] == packed["weights"] and deq["engram_per_request"] == packed["engram_per_request"]
    assert (deq["kv_storage"], packed["kv_storage"]) == ("dequantized", "packed")


def test_packed_variants_only_where_they_can_run():
    got = plan_variants(["engine", "static", "graphs"], ["reference", "fused"], ["dequantized", "packed"])
    packed = [v for v in got if v[2] == "packed"]
    assert packed == [("static", "fused", "packed"), ("graphs", "fused", "packed")]
    assert len(got) == 6 + 2


def test_a_row_counts_the_storage_its_step_reported():
    """A packed variant whose fused attention fell back is timed against bf16 bytes."""
    assert runs_as({"kernels_used": {"kv_storage": "packed (rope_quant kernel packs on write; ...)"}}) == "packed"
    assert runs_as({"kernels_used": {"kv_storage": "dequantized (kv_storage = packed asked, ...)"}}) == "dequantized"
    assert runs_as({"path": "engine"}) == "dequantized"


@pytest.mark.parametrize("argv", [["--kv-storage", "packed", "--paths", "engine"],
                                  ["--kv-storage", "packed", "--kernels", "reference"]])
def test_packed_without_a_path_that_reads_it_is_one_line(argv, capsys, tmp_path):
    assert main([*argv, "--device", "cpu", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("decode.py: --kv-storage packed: needs a static or graphs path") and err.count("\n") == 1
    assert not list(tmp_path.iterdir())
