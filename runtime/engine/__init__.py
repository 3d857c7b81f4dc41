"""The engine: batched generation over ``V41Model.forward`` (prefix cache, chunked
prefill, batched decode, sampling, stop strings, logprobs, timings).

    engine = Engine(V41Model(weights, RuntimeOptions(swa="bounded")), tokenizer=ByteTokenizer())
    [result] = engine.generate([GenerateRequest(prompt="2 + 2 =", max_tokens=8, stop=("\\n",))])

The names below load on first use (PEP 562), so importing a light submodule
(``runtime.engine.errors``, which ``runtime.scheduling`` needs) does not import torch.
"""

from __future__ import annotations

import importlib

_WHERE = {
    "Engine": "runtime.engine.engine",
    "EngineConfig": "runtime.scheduling",
    "EngineError": "runtime.engine.errors",
    "TokenizerError": "runtime.engine.errors",
    "GenerateRequest": "runtime.engine.requests",
    "GenerateResult": "runtime.engine.requests",
    "RequestEngagement": "runtime.engine.requests",
    "RequestTimings": "runtime.engine.requests",
    "TokenLogprob": "runtime.engine.requests",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'runtime.engine' has no attribute {name!r}")
