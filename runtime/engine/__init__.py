"""The engine: batched generation over ``V41Model.forward`` (prefix cache, chunked
prefill, batched decode, sampling, stop strings, logprobs, timings).

    engine = Engine(V41Model(weights, RuntimeOptions(swa="bounded")), tokenizer=ByteTokenizer())
    [result] = engine.generate([GenerateRequest(prompt="2 + 2 =", max_tokens=8, stop=("\\n",))])
"""

from runtime.engine.engine import Engine, EngineConfig
from runtime.engine.errors import EngineError, TokenizerError
from runtime.engine.requests import GenerateRequest, GenerateResult, RequestTimings, TokenLogprob

__all__ = [
    "Engine",
    "EngineConfig",
    "EngineError",
    "GenerateRequest",
    "GenerateResult",
    "RequestTimings",
    "TokenLogprob",
    "TokenizerError",
]
