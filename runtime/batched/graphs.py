"""The batched prefill's two segments captured in CUDA graphs and replayed.

Why two graphs and not one: the encoder (layers before the decoder-trim cut, every row)
and the decoder (the layers from the cut, kept rows) are the seeds' two capture units;
a caller can replay the encoder alone (e.g. to fill caches) or time them apart, and the
decoder graph reads the encoder graph's output tensors in place, so nothing is copied
between them. Shapes are fixed at capture: one ``CapturedPrefill`` per [B, T].
"""

from __future__ import annotations

import torch

from runtime.batched.prefill import BatchedPrefill, Encoded


class CapturedPrefill:
    """``CapturedPrefill(prefill, tokens)``: ``(tokens_like) -> logits [B, vocab]`` by
    copying into the captured input and replaying both graphs. The returned tensor is the
    graph's own output: it is overwritten by the next call (clone it to keep it)."""

    def __init__(self, prefill: BatchedPrefill, tokens: torch.Tensor, warmup: int = 2):
        if tokens.device.type != "cuda":
            raise ValueError(f"CapturedPrefill: CUDA graphs need tokens on a CUDA device, got {tokens.device}")
        self.prefill = prefill
        self.tokens = tokens.clone()  # the static input every replay reads
        side = torch.cuda.Stream()  # warm-up off the capture stream, as torch.cuda.graphs asks
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                prefill.decoder(prefill.encoder(self.tokens))
        torch.cuda.current_stream().wait_stream(side)
        self.encoder_graph, self.decoder_graph = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.encoder_graph):
            self.encoded: Encoded = prefill.encoder(self.tokens)
        with torch.cuda.graph(self.decoder_graph):
            self.logits = prefill.decoder(self.encoded)

    def replay(self) -> torch.Tensor:
        """Both graphs on the tokens already in ``self.tokens``."""
        self.encoder_graph.replay()
        self.decoder_graph.replay()
        return self.logits

    def __call__(self, tokens: torch.Tensor | None = None) -> torch.Tensor:
        if tokens is not None:
            self.tokens.copy_(tokens)
        return self.replay()
