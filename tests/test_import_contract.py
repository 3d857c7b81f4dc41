"""The import contract (``[tool.importlinter]`` in pyproject.toml, docs/architecture.md)
holds, and a planted back-edge breaks it: the check CI runs (``lint-imports`` in the
README's test command) would catch a new import that points up the layers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _root_packages() -> list[str]:
    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return list(doc["tool"]["importlinter"]["root_packages"])


def _only_python(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if not n.endswith(".py") and not (Path(folder) / n).is_dir()
            or n == "__pycache__"}


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """The packages' Python files and pyproject.toml, copied (the tests plant edges)."""
    if shutil.which("lint-imports", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("import-linter is not installed (the dev extra)")
    root = tmp_path_factory.mktemp("contract")
    for name in _root_packages():
        shutil.copytree(ROOT / name, root / name, ignore=_only_python)
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def lint(root: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    return subprocess.run([exe, "--no-cache"], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(root)}, timeout=300)


def test_the_contract_holds(tree):
    result = lint(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(("where", "line", "contract"), [
    ("runtime/_planted.py", "import validate.plan\n", "Packages follow the data flow"),
    ("validate/_planted.py", "from reports import document\n", "Packages follow the data flow"),
    ("tasks/_planted.py", "import runtime.options\n", "Packages follow the data flow"),
    ("validate/stats/_planted.py", "import validate.store\n", "Statistics and the gate"),
    ("validate/store/_planted.py", "import validate.analysis\n", "validate: demo"),
])
def test_a_planted_back_edge_breaks_it(tree, where, line, contract):
    planted = tree / where
    planted.write_text(line, encoding="utf-8")
    try:
        result = lint(tree)
    finally:
        planted.unlink()
    assert result.returncode != 0
    broken = result.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken and "_planted" in broken, result.stdout
