"""A faithful PyTorch runtime of the DeepSeek-V4.1 architecture at any scale.

Model side (see runtime/model.py for the forward pass):
    config.py    V41Config (released text_config names), from_hf_config; presets.py tiny/mid/flash
    options.py   RuntimeOptions (swa exact|bounded, encoder_replay, decoder_trim, cut, kernels,
                 batch_invariant, replay_tokens)
    weights.py   V41Weights (released tensor names), parameter_specs
    model.py     V41Model, SeqChunk, ChunkOutput;  state.py  SequenceState, PrefixSnapshot
    roles.py     CED layer roles, the decoder-trim cut, the ideal trim speed-up
    layer.py / attention.py / compressor.py / indexer.py / mhc.py / moe.py / engram.py /
    rope.py / quant.py / numerics.py / rows.py   the reference math, one job per file

``kv_bytes_per_token`` (runtime/kv_bytes.py) is re-exported here.
"""

from runtime.kv_bytes import kv_bytes_per_token

__all__ = ["kv_bytes_per_token"]
