"""A batched, differentiable forward of the V4.1 math on [B, T] token tensors.

``BatchedV41(weights)(tokens, straight_through=True)`` -> ``BatchedOutput``. It is an
independent whole-model implementation of what ``runtime.model.V41Model`` computes on a
cold prefill in exact SWA mode: used to train small V4.1 models on a GPU and as the
engine's whole-model reference. See ``model.py`` for what differs in form (not in math).
"""

from runtime.batched.model import BatchedOutput, BatchedV41

__all__ = ["BatchedOutput", "BatchedV41"]
