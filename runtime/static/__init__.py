"""The static decode path: preallocated slot caches (``DecodeSlab``) and a decode step on
fixed shapes with no host sync (``StaticDecodeStep``), the form a CUDA graph captures.
docs/architecture.md ("The static decode path") says what it shares with the engine."""

from runtime.static.slab import DecodeSlab
from runtime.static.step import StaticDecodeStep

__all__ = ["DecodeSlab", "StaticDecodeStep"]
