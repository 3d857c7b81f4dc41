"""Recipe files: the shipped one loads; malformed ones are one-line errors naming the field."""

from __future__ import annotations

import pytest

from runtime.errors import ConfigError
from training.recipe import load_recipe


def test_shipped_recipe_loads(repo_root):
    recipe = load_recipe(repo_root / "training" / "recipes" / "testbed.toml")
    assert recipe.preset == "testbed" and set(recipe.task_weights) == {
        "testbed_lookup", "testbed_arith", "testbed_lookup_arith"}
    assert len(recipe.digest()) == 64


@pytest.mark.parametrize("body,message", [
    ('stepz = 3\n[task_weights]\na = 1\n', "unknown recipe field 'stepz'"),
    ('steps = "many"\n[task_weights]\na = 1\n', "steps: expected an integer"),
    ('qat = 1\n[task_weights]\na = 1\n', "qat: expected true or false"),
    ('[task_weights]\na = "heavy"\n', "task_weights: expected a table of task = number"),
    ('lengths = [512, 256]\n[task_weights]\na = 1\n', "lengths: expected increasing"),
])
def test_malformed_recipe_is_one_line(tmp_path, body, message):
    path = tmp_path / "r.toml"
    path.write_text(body)
    with pytest.raises(ConfigError) as info:
        load_recipe(path)
    text = str(info.value)
    assert text.startswith(str(path)) and message in text and "\n" not in text



def test_shipped_checkpoint_keeps_its_recipe_digest(repo_root, tmp_path):
    """Fields added after run 3 (compile_dynamic) must not change the digest of the recipe
    the shipped testbed was trained with; set, they enter it (recomputed here by hand from
    the canonical JSON, not through Recipe.digest)."""
    import hashlib
    import json

    shipped = repo_root / "runtime" / "testbed" / "recipe.toml"
    recipe = load_recipe(shipped)
    manifest = json.loads((repo_root / "runtime" / "testbed" / "testbed.json").read_text())
    assert recipe.digest() == manifest["recipe_digest"]
    assert "compile_dynamic" not in recipe.to_dict()
    head, sep, tail = shipped.read_text().partition("[task_weights]")
    kept = "\n".join(line for line in head.splitlines() if not line.startswith("compile"))
    path = tmp_path / "dynamic.toml"
    path.write_text(kept + "\ncompile = true\ncompile_dynamic = true\n" + sep + tail)
    dynamic = load_recipe(path)
    text = json.dumps(dynamic.to_dict(), sort_keys=True, separators=(",", ":"))
    assert dynamic.compile_dynamic and dynamic.digest() == hashlib.sha256(text.encode()).hexdigest()
    assert dynamic.digest() != recipe.digest()
