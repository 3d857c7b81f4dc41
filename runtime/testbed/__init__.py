"""The trained testbed checkpoint that ships with v41val, and where to find it.

``runtime/testbed/`` holds a small V4.1-architecture model (shape:
``V41Config.preset("testbed")``) trained by ``training/`` on the synthetic tasks of
``tasks/testbed``: the checkpoint in the released naming and formats
(``model.safetensors`` + ``config.json``), its ``tokenizer.json``, the recipe it was
trained with, the loss log and curve, and ``testbed.json`` (recipe digest, data seed,
steps, sha256 of every file). Random presets cannot show a quality change (every
accuracy sits at the floor); this model can, so it is the embedded default of the demo.
"""

from __future__ import annotations

import json
from pathlib import Path

from runtime.errors import CheckpointError

TESTBED_DIR = Path(__file__).resolve().parent
MANIFEST = "testbed.json"


def testbed_dir() -> Path:
    """The shipped checkpoint folder; a one-line error when this build has none."""
    if not (TESTBED_DIR / "config.json").is_file() or not (TESTBED_DIR / MANIFEST).is_file():
        raise CheckpointError(f"{TESTBED_DIR}: the trained testbed checkpoint is not part of this "
                              "build (expected config.json and testbed.json there)")
    return TESTBED_DIR


def testbed_manifest() -> dict:
    """``testbed.json``: recipe digest, data seed, steps, per-file sha256."""
    return json.loads((testbed_dir() / MANIFEST).read_text())
