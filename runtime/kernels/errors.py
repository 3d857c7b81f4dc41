"""Input errors of the kernel registry (derive from ValueError so the CLI prints one line)."""

from __future__ import annotations

from runtime.errors import ConfigError


class KernelChoiceError(ConfigError):
    """``RuntimeOptions.kernels`` names an unknown op or is malformed."""


class KernelUnavailableError(RuntimeError):
    """A fused kernel was required (``on_unavailable="error"``) but cannot run here."""
