"""Every document the code cites ships in the repo: comments, docstrings and notes name
files that exist (``docs/...``, ``tasks/data/README.md``, ...), never a design document
or spec that lives elsewhere, and never an absolute path of another machine."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("*.py", "*.md", "*.sh", "*.toml", "run")
SKIP_DIRS = {".git", "__pycache__", "build", "dist", ".pytest_cache", ".ruff_cache"}

# a cited markdown file: a path-like token ending in .md
CITED_MD = re.compile(r"(?<![\w/.-])((?:\.{1,2}/)?[\w.-]+(?:/[\w.-]+)*\.md)\b")
# absolute paths of a machine: the code must not depend on them
ABSOLUTE = re.compile(r"(?<![\w.~-])/(?:work|home|Users|root|mnt|shared)/[\w./-]+")
# a section sign or "spec" citation without the file it belongs to
SPEC_WORD = re.compile(r"\b(?:[Ss]pec(?:'s)?\s*(?:§|section\b)|DESIGN\b|shared/spec/)")


def scanned_files(root: Path = ROOT) -> list[Path]:
    out = []
    for pattern in SCANNED:
        for path in root.rglob(pattern):
            rel = path.relative_to(root)
            if any(part in SKIP_DIRS or part.startswith(".venv") or part.endswith(".egg-info")
                   for part in rel.parts):
                continue
            if path.is_file():
                out.append(path)
    return sorted(set(out))


def _exists(path: Path, cited: str, names: set[str], root: Path) -> bool:
    """A path resolves from the repo root or the citing file's folder; a bare file name
    (a tree listing, package data) names a file somewhere in the repo."""
    if "/" not in cited and cited in names:
        return True
    return any((base / cited).exists() for base in (root, path.parent))


def prose(path: Path, text: str) -> list[tuple[int, str]]:
    """(line number, text) of what a reader reads as prose: every line of a document,
    the comments and docstrings (triple-quoted strings) of Python; plain string literals
    are data (file names a test writes), not citations."""
    if path.suffix != ".py":
        return list(enumerate(text.splitlines(), 1))
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        body = tok.string.lstrip("rRbBuUfF")
        if tok.type == tokenize.COMMENT or (tok.type == tokenize.STRING
                                           and body[:3] in ('"""', "\'\'\'")):
            out += [(tok.start[0] + i, line) for i, line in enumerate(tok.string.splitlines())]
    return out


def problems(root: Path = ROOT) -> list[str]:
    """Every citation problem in the tree under ``root`` (the repo; a test's own tree)."""
    found = []
    files = scanned_files(root)
    names = {p.name for p in files}
    for path in files:
        rel = path.relative_to(root)
        if path.resolve() == Path(__file__).resolve():
            continue  # this file names the patterns it looks for
        text = path.read_text(encoding="utf-8", errors="replace")
        for lineno, line in prose(path, text):
            for m in CITED_MD.finditer(line):
                if not _exists(path, m.group(1), names, root):
                    found.append(f"{rel}:{lineno}: cites {m.group(1)}, which is not in the repo")
            for m in ABSOLUTE.finditer(line):
                found.append(f"{rel}:{lineno}: absolute path {m.group(0)}")
            for m in SPEC_WORD.finditer(line):
                found.append(f"{rel}:{lineno}: {m.group(0)!r} cites no file of the repo")
            if "§" in line and ".md" not in line and rel.parts[0] != "docs":
                found.append(f"{rel}:{lineno}: a section sign without the document it is in")
    return found


def test_every_cited_document_is_in_the_repo():
    assert problems() == []


def test_the_scan_catches_a_missing_citation(tmp_path):
    """On a tree of its own: a file planted in the repo itself was seen, and then gone, by a
    scan running at the same time (two pytest runs, or xdist workers, on one checkout)."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "here.md").write_text("# here\n")
    planted = tmp_path / "tests" / "_planted_citation.py"
    planted.write_text('"""See DESIGN.md principle 1, /work/notes/x.md and spec §4; docs/here.md is here."""\n')
    found = problems(tmp_path)
    assert found and all("_planted_citation" in p for p in found)
    assert not any("here.md" in p for p in found)
    assert any("DESIGN.md" in p for p in found)
    assert any("absolute path /work/notes/x.md" in p for p in found)
    assert any("spec §" in p for p in found)
