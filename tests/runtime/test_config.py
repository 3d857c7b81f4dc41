"""V41Config presets, HF round trip, engram layout and one-line config errors."""

from __future__ import annotations

import json

import pytest

from runtime.config import V41Config, engram_primes, engram_table_sizes, from_hf_config
from runtime.errors import ConfigError
from runtime.options import RuntimeOptions


def _naive_is_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, int(n**0.5) + 1))


@pytest.mark.parametrize("name", ["tiny", "mid", "flash"])
def test_presets_validate_and_round_trip(name, tmp_path):
    cfg = V41Config.preset(name)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg.to_hf_dict()))
    assert from_hf_config(tmp_path) == cfg
    assert from_hf_config(path) == cfg


def test_flash_engram_sizes_match_the_release():
    # The released config.json lists these table sizes; the prime layout must reproduce them.
    assert engram_table_sizes(V41Config.preset("flash")) == (384006168, 384016682)


def test_tiny_engram_primes_are_distinct_primes_above_the_start():
    cfg = V41Config.preset("tiny")
    flat = [p for layer in engram_primes(cfg) for sizes in layer for p in sizes]
    assert len(flat) == len(set(flat)) == 2 * 3 * cfg.engram_n_heads
    assert all(_naive_is_prime(p) and p >= cfg.engram_vocab_size for p in flat)
    assert flat[:2] == [1009, 1013]  # the first primes after 999
    assert cfg.engram_num_embeddings == tuple(sum(flat[i * 6:(i + 1) * 6]) for i in range(2))


def test_tiny_keeps_every_structural_feature():
    cfg = V41Config.preset("tiny")
    assert set(cfg.compress_ratios) == {0, 1, 2}
    assert cfg.sliding_window == 128 and cfg.torch_dtype == "float32"
    assert len(cfg.kv_source_layer_ids) >= 3 and cfg.engram_layer_ids and cfg.hc_mult == 4
    reindex = [i for i in cfg.index_source_layer_ids if i not in cfg.kv_source_layer_ids]
    assert reindex == [8, 10]
    assert cfg.kv_source_of(3) == 2 and cfg.kv_source_of(11) == 6 and cfg.kv_source_of(1) is None
    assert cfg.index_source_of(9) == 8


def test_released_nested_config_with_nextn_ratios(tmp_path):
    d = V41Config.preset("flash").to_hf_dict()
    d["text_config"]["compress_ratios"] += [0, 0, 0]  # DSpark layers ship in the list
    d["text_config"]["rope_scaling"] = {"type": "yarn", "factor": 16, "beta_fast": 32,
                                        "beta_slow": 1, "original_max_position_embeddings": 65536}
    d["vision_config"] = {"hidden_size": 1024}
    (tmp_path / "config.json").write_text(json.dumps(d))
    assert from_hf_config(tmp_path) == V41Config.preset("flash")


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"kv_source_layer_ids": (1, 2, 4, 6)}, "kv_source_layer_ids: layer 1"),
        ({"hidden_size": 250}, "hidden_size: 250 is not a multiple of 32"),
        ({"compress_ratios": (0, 0, 2, 2, 2, 2, 1, 1, 1, 1, 1, 4)}, "compress_ratios"),
        ({"compress_ratios": (0, 0, 2, 2, 2)}, "compress_ratios: 5 entries"),
        ({"candidate_source_layer_id": 7}, "candidate_source_layer_id: 7"),
        ({"index_source_layer_ids": (1, 2, 4, 6)}, "index_source_layer_ids: layer 1"),
        ({"o_groups": 3}, "o_groups"),
        ({"num_experts_per_tok": 9}, "num_experts_per_tok"),
        ({"engram_num_embeddings": (5,)}, "engram_num_embeddings"),
        ({"scoring_func": "relu"}, "scoring_func"),
    ],
)
def test_bad_configs_give_one_line_errors(changes, needle):
    with pytest.raises(ConfigError) as info:
        V41Config.preset("tiny").replace(**changes)
    message = str(info.value)
    assert needle in message and "\n" not in message


def test_bad_files_name_the_file_and_field(tmp_path):
    with pytest.raises(ConfigError, match="no such config file"):
        from_hf_config(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        from_hf_config(bad)
    d = V41Config.preset("tiny").to_hf_dict()
    d["text_config"]["hidden_size"] = "big"
    bad.write_text(json.dumps(d))
    with pytest.raises(ConfigError, match=r"bad.json: hidden_size: expected an integer"):
        from_hf_config(bad)
    d["text_config"]["hidden_size"] = 256
    d["text_config"]["kv_source_layer_ids"] = [0, 4, 6]
    bad.write_text(json.dumps(d))
    with pytest.raises(ConfigError, match=r"bad.json: kv_source_layer_ids: layer 0"):
        from_hf_config(bad)


def test_options_defaults_and_errors():
    assert RuntimeOptions().encoder_replay is False and RuntimeOptions().decoder_trim is False
    b = RuntimeOptions(swa="bounded")
    assert b.encoder_replay and b.decoder_trim and b.cut == "after"
    only_trim = RuntimeOptions(swa="bounded", encoder_replay=False)
    assert only_trim.decoder_trim and not only_trim.encoder_replay
    assert RuntimeOptions(replay_tokens=16).window(128) == 16
    assert RuntimeOptions().window(128) == 128
    assert RuntimeOptions(kernels=["+gate", "-mhc"]).kernels == ("+gate", "-mhc")
    for bad in ({"swa": "fast"}, {"cut": "before"}, {"kernels": "+nosuchop"}, {"replay_tokens": 0}):
        with pytest.raises(ConfigError):
            RuntimeOptions(**bad)


def test_layer_roles_of_flash_and_tiny():
    from runtime.roles import ideal_trim_speedup, layer_roles

    flash = layer_roles(V41Config.preset("flash"))
    assert [r.layer for r in flash if r.is_kv_source] == [2, 8, 14, 20]
    assert [r.layer for r in flash if r.index_mode == "reindex"] == [24, 28, 32, 36]
    assert flash[3].index_mode == "reuse" and flash[3].kv_source == 2 and flash[0].index_mode is None
    assert flash[25].index_source == 24 and flash[25].kv_source == 20
    assert [r.layer for r in flash if r.trimmed] == list(range(21, 40))  # vLLM cut
    assert [r.layer for r in layer_roles(V41Config.preset("flash"), "at") if r.trimmed] == list(range(20, 40))
    assert ideal_trim_speedup(V41Config.preset("flash")) == 40 / 21
    tiny = layer_roles(V41Config.preset("tiny"))
    assert [r.layer for r in tiny if r.trimmed] == [7, 8, 9, 10, 11]
    assert [r.layer for r in tiny if r.candidate_source] == [6]
    assert [r.layer for r in tiny if r.engram] == [1, 4]


def test_candidate_consumers_must_share_the_candidate_kv_source():
    with pytest.raises(ConfigError, match="uses candidates of layer 4"):
        V41Config.preset("tiny").replace(candidate_source_layer_id=4)
