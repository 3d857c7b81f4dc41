"""Ticket counters for kernels whose programs split one output tile's reduction: each
program writes its float32 partial, takes a ticket (an acq_rel atomic add on the tile's
counter), and the program that takes the last ticket sums the partials in split order
(so the result does not depend on which program finished last) and puts the counter
back to 0. One launch, no host sync, no memset per call, graph-capturable.

The counters are int32 zeros allocated once per device and left at zero by every call.
A grown set replaces the old one for new calls, but the old one is kept alive: a CUDA
graph captured earlier still points at it. One holder serves one stream at a time (the
runtime's case: a model's layers run in order on its stream); two calls running at
once on two streams would share counters.
"""

from __future__ import annotations

import torch


class TicketCounters:
    """``get(device, n)`` -> an int32 tensor of at least ``n`` zeros on ``device``."""

    def __init__(self, minimum: int = 64) -> None:
        self.minimum = minimum
        self._kept: dict[torch.device, list[torch.Tensor]] = {}

    def get(self, device: torch.device, n: int) -> torch.Tensor:
        kept = self._kept.setdefault(device, [])
        if not kept or kept[-1].numel() < n:
            size = max(n, self.minimum, 2 * kept[-1].numel() if kept else 0)
            kept.append(torch.zeros(size, dtype=torch.int32, device=device))
        return kept[-1]
