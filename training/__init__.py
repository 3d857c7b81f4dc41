"""Training the testbed: a small V4.1-architecture model whose quality can move.

v41val measures what an inference optimization costs in quality; with random weights
every accuracy sits at the floor and nothing can move. This package trains a small model
of the V4.1 architecture (``V41Config.preset("testbed")``) on the synthetic tasks of
``tasks.testbed`` with the batched differentiable forward of ``runtime.batched``:

    recipe = load_recipe("training/recipes/testbed.toml")
    train(recipe, run_dir, device="cuda", max_seconds=540)   # resumable: call again
    export_testbed(run_dir, recipe, "runtime/testbed")        # released naming + hashes

Data flow: ``tasks`` (examples) and ``runtime`` (model math, checkpoint writer) feed this
package; nothing in ``runtime``, ``tasks``, ``validate`` or ``reports`` imports it.
"""

from training.recipe import Recipe, load_recipe

__all__ = ["Recipe", "load_recipe"]
