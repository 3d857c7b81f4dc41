"""KV bytes per token from the config (docs/model.md §4 figures at flash, hand arithmetic elsewhere)."""

from __future__ import annotations

from runtime.config import V41Config
from runtime.kv_bytes import kv_bytes_per_token


def test_flash_matches_the_published_figures():
    kv = kv_bytes_per_token(V41Config.preset("flash"))
    assert kv.swa_entry_bytes == 528  # 512 e4m3 + 16 ue8m0
    assert kv.global_entry_bytes == 288  # 256 B e2m1 + 32 e4m3 scales
    assert kv.index_entry_bytes == 68  # 64 B e2m1 + 4 ue8m0
    assert [(s.layer, s.ratio, s.record_bytes) for s in kv.sources] == [
        (2, 2, 356), (8, 2, 356), (14, 2, 356), (20, 1, 356)
    ]
    assert kv.persistent_bytes_per_token == 890  # 3 x 356/2 + 356
    assert kv.swa_bytes_per_sequence == 40 * 128 * 528  # ~2.7 MB
    # At 1M tokens: ~0.89 GB persistent + the constant window + the compressor buffers.
    total = kv.sequence_bytes(1_000_000)
    assert total == 890_000_000 + 40 * 128 * 528 + 3 * 2 * 512 * 4


def test_tiny_is_derived_from_its_fields():
    cfg = V41Config.preset("tiny")
    kv = kv_bytes_per_token(cfg)
    # head_dim 128: 128 + 128/32 = 132 B window entry; 64 + 128/16 = 72 B main KV;
    # index_head_dim 32: 16 + 1 = 17 B key; sources 2 and 4 (ratio 2) and 6 (ratio 1).
    assert kv.swa_entry_bytes == 132
    assert kv.global_entry_bytes + kv.index_entry_bytes == 89
    assert kv.persistent_bytes_per_token == 89 / 2 + 89 / 2 + 89
    assert kv.sequence_bytes(10) == 178 * 10 + 12 * 10 * 132 + 2 * 2 * 128 * 4


def test_changing_the_schedule_changes_the_figure():
    flash = V41Config.preset("flash")
    fewer = flash.replace(kv_source_layer_ids=(2, 20), index_source_layer_ids=(2, 20, 24))
    assert kv_bytes_per_token(fewer).persistent_bytes_per_token == 356 / 2 + 356


def test_cli_bench_kv_json(capsys):
    import json

    from v41val.cli import main

    main(["bench", "kv", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["preset"] == "flash"
    assert doc["swa_entry_bytes"] == 528 and doc["persistent_bytes_per_token"] == 890
    cached = doc["prefix_cache_bytes_per_cached_token"]
    assert cached["bounded"] == 890 and cached["block_tokens"] == 64
    assert cached["exact"] == 890 + doc["swa_layers"] * 528  # 64-token blocks < W - 1


def test_cli_bench_kv_bad_preset_is_exit_2(capsys):
    import pytest

    from v41val.cli import main

    with pytest.raises(SystemExit) as info:
        main(["bench", "kv", "--preset", "huge"])
    assert info.value.code == 2
    assert "preset" in capsys.readouterr().err
