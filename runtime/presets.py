"""The three scales of the toolkit as V41Config presets (``V41Config.preset(name)``).

- flash: the released DeepSeek-V4.1-Flash dimensions (byte accounting, real checkpoints);
- tiny:  docs/model.md §7a, 12 layers for a 2-core CPU in float32, every structural feature kept;
- mid:   docs/model.md §7b, about 5B parameters in bf16 on one H200 (shows the trim speed-up).
"""

from __future__ import annotations

from runtime.config import V41Config, YarnScaling, engram_table_sizes


def flash_config() -> V41Config:
    """The released DeepSeek-V4.1-Flash dimensions (docs/model.md §1)."""
    return V41Config()


def tiny_config() -> V41Config:
    """docs/model.md §7a: 12 layers on a 2-core CPU in float32, every structural feature kept:
    ratio 0/2/1 layers, three KV sources, re-indexing layers (8, 10), Engram, mHC, MoE."""
    base = V41Config(
        vocab_size=512,
        hidden_size=256,
        num_hidden_layers=12,
        num_attention_heads=4,
        head_dim=128,
        q_lora_rank=64,
        qk_rope_head_dim=16,
        max_position_embeddings=65536,
        rope_scaling=YarnScaling(factor=16.0, original_max_position_embeddings=4096),
        sliding_window=128,
        compress_ratios=(0, 0, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1),
        kv_source_layer_ids=(2, 4, 6),
        index_source_layer_ids=(2, 4, 6, 8, 10),
        candidate_source_layer_id=6,
        candidate_topk_blocks=16,
        candidate_block_size=8,
        index_n_heads=2,
        index_head_dim=32,
        index_topk=32,
        o_groups=2,
        o_lora_rank=64,
        moe_intermediate_size=128,
        n_routed_experts=8,
        n_shared_experts=1,
        num_experts_per_tok=2,
        engram_layer_ids=(1, 4),
        engram_vocab_size=1000,
        engram_num_embeddings=(0, 0),
        engram_n_heads=2,
        engram_head_dim=32,
        engram_compressed_vocab_size=512,
        rms_norm_eps=1e-6,
        torch_dtype="float32",
    )
    return base.replace(engram_num_embeddings=engram_table_sizes(base))


def mid_config() -> V41Config:
    """docs/model.md §7b: about 5B parameters in bf16 on one H200; trimming skips 11 of 24 layers."""
    base = V41Config(
        hidden_size=2048,
        num_hidden_layers=24,
        num_attention_heads=16,
        head_dim=512,
        q_lora_rank=512,
        qk_rope_head_dim=64,
        compress_ratios=(0, 0) + (2,) * 10 + (1,) * 12,
        kv_source_layer_ids=(2, 7, 12),
        index_source_layer_ids=(2, 7, 12, 16, 20),
        candidate_source_layer_id=12,
        index_n_heads=16,
        index_head_dim=128,
        index_topk=512,
        o_groups=4,
        o_lora_rank=512,
        moe_intermediate_size=1024,
        n_routed_experts=32,
        n_shared_experts=1,
        num_experts_per_tok=6,
        engram_layer_ids=(1, 7),
        engram_vocab_size=50000,
        engram_num_embeddings=(0, 0),
        engram_compressed_vocab_size=129280,
        rms_norm_eps=1e-6,
        torch_dtype="bfloat16",
    )
    return base.replace(engram_num_embeddings=engram_table_sizes(base))


def testbed_config() -> V41Config:
    """The shape of the trained testbed (``runtime/testbed/``): ``tiny`` cut to 4 layers
    (ratios 0/2/1/1, KV sources 1 and 2, layer 3 re-indexes, candidates from layer 2,
    Engram on layer 0, 4 routed experts) with hidden size 128, head dim 64 and a 32-token
    window. Small enough to train in minutes on one H200 and to run the demo on a 2-core
    CPU; every structural feature stays, and prompts of a few hundred tokens already span
    many windows, so the window, the compressed path and bounded replay all matter."""
    base = tiny_config().replace(
        num_hidden_layers=4, compress_ratios=(0, 2, 1, 1), kv_source_layer_ids=(1, 2),
        index_source_layer_ids=(1, 2, 3), candidate_source_layer_id=2, engram_layer_ids=(0,),
        n_routed_experts=4, hidden_size=128, head_dim=64, sliding_window=32,
    )
    return base.replace(engram_num_embeddings=engram_table_sizes(base))


PRESETS = {"tiny": tiny_config, "mid": mid_config, "flash": flash_config, "testbed": testbed_config}
