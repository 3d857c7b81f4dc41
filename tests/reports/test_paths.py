"""Output paths never leave the chosen directory."""

from __future__ import annotations

import os

import pytest

from reports.errors import OutputPathError
from reports.paths import safe_output_path, write_text_safely


def test_relative_path_inside_root_is_accepted(tmp_path):
    got = safe_output_path("nightly/2026-11-29/report.html", tmp_path)
    assert got == tmp_path.resolve() / "nightly" / "2026-11-29" / "report.html"


@pytest.mark.parametrize("bad", ["../report.html", "a/../../report.html", "/etc/passwd",
                                 "..", ".", ""])
def test_escapes_are_rejected_with_one_line(tmp_path, bad):
    with pytest.raises(OutputPathError) as err:
        safe_output_path(bad, tmp_path / "out")
    assert "\n" not in str(err.value)


def test_absolute_path_inside_root_is_accepted(tmp_path):
    inside = tmp_path / "r.json"
    assert safe_output_path(str(inside), tmp_path) == inside.resolve()


def test_symlink_pointing_out_is_rejected(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(outside, root / "link")
    with pytest.raises(OutputPathError):
        safe_output_path("link/report.html", root)


def test_write_creates_parents_and_leaves_no_temp_file(tmp_path):
    path = write_text_safely("a/b/report.md", "# hi\n", tmp_path)
    assert path.read_text() == "# hi\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["report.md"]
    with pytest.raises(OutputPathError):
        write_text_safely("../x.md", "no", tmp_path)
    assert not (tmp_path.parent / "x.md").exists()
