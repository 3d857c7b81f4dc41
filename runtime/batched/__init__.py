"""A batched, differentiable forward of the V4.1 math on [B, T] token tensors.

An independent whole-model implementation of what ``runtime.model.V41Model`` computes on
a cold prefill in exact SWA mode, used to train small V4.1 models on a GPU and as the
engine's whole-model reference::

    from runtime.batched import BatchedV41, BatchedOutput
    model = BatchedV41(weights)            # holds a reference; train weights.parameters()
    with torch.autocast("cuda", dtype=torch.bfloat16):      # optional
        out = model(tokens, straight_through=True)           # tokens int64 [B, T]
    out.logits         # float32 [B, T, vocab] (also under autocast)
    out.indexer_loss   # 0-dim, differentiable: DSA KL that trains the indexer
    out.expert_load    # float32 [n_layers, n_routed_experts], detached

    loss = cross_entropy(out.logits, ...) + out.indexer_loss; loss.backward()
    # ffn.gate.bias gets no gradient: move it from expert_load (aux-loss-free balancing),
    # e.g. bias += rate * sign(expert_load.mean(-1, keepdim=True) - expert_load).

``torch.compile(model.forward)`` (or of the whole training step) traces one graph with
no breaks; measured on one H200 at the testbed size, B=64, T=1024, bf16 autocast, a
forward + backward step ran at 1.3M tokens/s compiled (7.5 GiB peak), 0.46M eager.

Files: model.py (the layer loop, mHC sites, outputs), layer.py (the attention
sublayer), attention.py (window + compressed sparse attention), compressor.py,
indexer.py (selection and the DSA loss), moe.py (dense experts, load), engram.py (n-gram
ids), rounding.py (straight-through roundings), common.py (float32 regions, RoPE rows),
prefill.py (inference: a sync-free cold prefill with decoder trim, as an encoder and a
decoder that can each be captured in a CUDA graph).
GPU speed: benchmarks/batched_step.py; compiled vs eager: tests/runtime/test_batched_gpu.py.
"""

from runtime.batched.model import BatchedOutput, BatchedV41

__all__ = ["BatchedOutput", "BatchedV41"]
