"""build_model: the model object a ``RuntimeOptions`` asks for.

``decode = "engine"`` is a plain ``V41Model``; "static" and "graphs" wrap it in
``runtime.static.model.StaticDecodeModel`` (decode steps on preallocated caches, the
latter replayed from CUDA graphs). Every caller that turns options into a model (the
builtin engine, ``v41val serve``, the lm-eval model, the benchmarks) goes through here, so
the switch means the same everywhere.
"""

from __future__ import annotations

from runtime.model import V41Model
from runtime.options import RuntimeOptions


def build_model(weights, options: RuntimeOptions | None = None, *, max_batch: int = 64):
    """``max_batch``: the most requests that decode at once (the engine's
    ``max_batch_requests``); it sizes the static slab."""
    model = V41Model(weights, options)
    if model.options.decode == "engine":
        return model
    from runtime.static.model import StaticDecodeModel

    return StaticDecodeModel(model, max_batch=max_batch, graphs=model.options.decode == "graphs")
