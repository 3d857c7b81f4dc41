"""Learning-rate schedule: linear warm-up, then cosine decay to a floor."""

from __future__ import annotations

import math

from training.recipe import Recipe


def lr_at(recipe: Recipe, step: int) -> float:
    """Learning rate of optimizer step ``step`` (0-based)."""
    if step < recipe.warmup_steps:
        return recipe.lr * (step + 1) / recipe.warmup_steps
    span = max(1, recipe.steps - recipe.warmup_steps)
    progress = min(1.0, (step - recipe.warmup_steps) / span)
    floor = recipe.lr * recipe.min_lr_ratio
    return floor + (recipe.lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
