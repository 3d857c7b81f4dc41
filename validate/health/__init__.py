"""Health of stored runs (coverage, invalid, empty, truncated, length ratio), measured
before any statistics; the gate judges the resulting ``HealthReport``."""

from validate.health.facts import (
    VariantHealth,
    is_truncated,
    pair_health,
    paired_coverage,
    variant_health,
)

__all__ = ["VariantHealth", "is_truncated", "pair_health", "paired_coverage", "variant_health"]
