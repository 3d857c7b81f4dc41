"""The engine: batched generation over ``V41Model.forward`` (prefix cache, chunked
prefill, batched decode, sampling, stop strings, logprobs, timings)."""
