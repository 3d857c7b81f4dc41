"""Export a trained run as the testbed checkpoint, in the released naming.

The folder gets what ``v41val`` needs to serve the model and what a reader needs to
trust it: the checkpoint written by ``runtime.checkpoint.save_checkpoint`` (release
formats: FP8 blocks, MXFP4 experts), the test tokenizer as ``tokenizer.json``, the
recipe, the loss log and its curve, and ``testbed.json`` with the recipe digest, the data
seed, the step count and the sha256 of every file (``SHA256SUMS`` too, for
``sha256sum -c``). The weights are snapped to their release round trip first; with QAT
that changes nothing, since training already read them that way.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from runtime.checkpoint import save_checkpoint
from runtime.tokenizer import ByteTokenizer
from training.curve import plot_loss_curve, read_log
from training.loop import LOG, new_weights
from training.qat import snap_to_release
from training.recipe import Recipe
from training.state import PROGRESS, read_weights

MANIFEST = "testbed.json"


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def export_testbed(run_dir: str | Path, recipe: Recipe, recipe_file: str | Path,
                   out_dir: str | Path) -> dict:
    run, out = Path(run_dir), Path(out_dir)
    state = run / "state"
    progress = json.loads((state / PROGRESS).read_text())
    weights = new_weights(recipe, "cpu")
    read_weights(state, weights)
    snap_to_release(weights)
    out.mkdir(parents=True, exist_ok=True)
    summary = save_checkpoint(weights, out, tokenizer=ByteTokenizer(vocab_size=weights.config.vocab_size))
    shutil.copyfile(recipe_file, out / "recipe.toml")
    rows = read_log(run / LOG)
    (out / "loss_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    plot_loss_curve(rows, out / "loss_curve.png",
                    f"testbed: {recipe.preset} shape, {progress['step']} of {recipe.steps} steps, "
                    f"data seed {recipe.data_seed}")
    files = sorted(p for p in out.iterdir() if p.is_file() and p.name not in (MANIFEST, "SHA256SUMS"))
    hashes = {p.name: sha256_of(p) for p in files}
    manifest = {
        "recipe_digest": recipe.digest(), "data_seed": recipe.data_seed,
        "init_seed": recipe.init_seed, "steps": progress["step"], "recipe_steps": recipe.steps,
        "complete": progress["step"] >= recipe.steps,
        "train_seconds": progress["elapsed_s"], "final": rows[-1] if rows else None,
        "checkpoint": {k: v for k, v in summary.items() if k != "directory"}, "sha256": hashes,
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    (out / "SHA256SUMS").write_text("".join(f"{h}  {n}\n" for n, h in hashes.items()))
    return manifest
