"""benchmarks/ncu_source_lines.py on a source-page CSV written here the way ncu writes it:
launches told apart by their sections, samples and stall reasons summed per source line
(SASS rows not counted twice), shares against sums worked out by hand, and malformed
files as one line with exit status 2."""

from __future__ import annotations

import csv
import io

import pytest

from benchmarks.ncu_source_lines import main, markdown, parse, read_rows

HEADER = ["Line No", "Source", "Address", "Source", "Warp Stall Sampling (All Samples)", "# Samples",
          "stall_barrier", "stall_long_sb", "stall_barrier (Not Issued)", "stall_long_sb (Not Issued)"]


def section(path: str, kernel: str, lines: list[tuple[int, str, int, int, int]]) -> list[list[str]]:
    """One file's section: per source line (number, text, samples, barrier, long_sb), then
    one SASS row carrying the same samples (as ncu repeats them per instruction)."""
    rows = [["File Path", path], ["Function Name", kernel], HEADER]
    for number, text, samples, barrier, long_sb in lines:
        counts = [str(samples), str(samples), str(barrier), str(long_sb), "0", "0"]
        rows.append([str(number), text, "-", "-", *counts])
        rows.append(["", "", "0x7f00", "  LDG.E R1, [R2]", *counts])
    return rows


LIB = "/venv/triton/language/standard.py"
ROWS = (section(LIB, "_gate_kernel", [(191, "return core.reduce(max)", 6, 4, 0)])
        + section("/repo/runtime/kernels/gate.py", "_gate_kernel",
                  [(92, "ticket = tl.atomic_add(...)", 30, 25, 0), (73, "for d0 in range(...)", 10, 0, 10),
                   (57, "pid_m = tl.program_id(0)", 0, 0, 0)])
        + section("/repo/runtime/kernels/gate.py", "_gate_kernel", [(73, "for d0 in range(...)", 20, 0, 19)])
        + section(LIB, "_mhc_site_kernel", [(263, "return a + b", 3, 0, 3)])
        + section("/repo/runtime/kernels/mhc.py", "_mhc_site_kernel", [(410, "n_x = tl.load(...)", 9, 0, 9)]))


def test_launches_are_split_at_their_sections_and_summed_per_source_line():
    launches = parse(ROWS)
    assert [launch.kernel for launch in launches] == ["_gate_kernel", "_gate_kernel", "_mhc_site_kernel"]
    assert [launch.samples for launch in launches] == [6 + 30 + 10 + 0, 20, 3 + 9]  # SASS rows not added again
    first = {(s.file, s.line): s for s in launches[0].lines}
    assert first[("gate.py", 92)].stalls == {"barrier": 25}  # zero counts and "Not Issued" columns dropped
    assert first[("standard.py", 191)].samples == 6
    note = markdown(launches, top=2)
    assert "### launch 0: _gate_kernel, 46 samples" in note
    assert f"| 30 | {30 / 46:.0%} | gate.py:92 |" in note and "| 10 | 22% | gate.py:73 |" in note
    assert "standard.py:191" not in note  # third of launch 0 by samples: beyond top=2
    assert "| 20 | 100% | gate.py:73 | `for d0 in range(...)` | long_sb 19 |" in note


def test_a_quote_inside_a_source_line_stays_in_its_field():
    """ncu does not escape a quote inside a field (seen in session 31: attention's
    ``tl.inline_asm_elementwise(_PREFETCH_L1, "=r,l", ..., dtype=tl.int32,`` line, which a
    CSV reader split into a row starting ``' dtype=tl.int32'``): read_rows keeps the line
    whole and its samples in their columns."""
    text = "\n".join(['"File Path","/repo/runtime/kernels/attention.py"', '"Function Name","_attn_partial_kernel"',
                      ",".join(f'"{h}"' for h in HEADER),
                      '"314","x = tl.inline_asm_elementwise(A, "=r,l", [p], dtype=tl.int32,","-","-","7","7","4","3",'
                      '"0","0"',
                      '"","","0x7f00","  LOP3.LUT R6, R0, 0x1f, RZ, 0xc0, !PT","7","7","4","3","0","0"'])
    assert list(csv.reader(io.StringIO(text)))[3][4] != "7"  # a CSV reader's split: the samples' column shifted
    (launch,) = parse(read_rows(text))
    (line,) = launch.lines
    assert (line.line, line.text, line.samples, line.stalls) == (
        314, 'x = tl.inline_asm_elementwise(A, "=r,l", [p], dtype=tl.int32,', 7, {"barrier": 4, "long_sb": 3})


def test_rows_without_a_line_number_are_counted_not_read():
    """A data row that still has no line number is counted and named in the note, and the
    lines around it are read."""
    rows = section("/repo/runtime/kernels/attention.py", "_attn_partial_kernel",
                   [(10, "x = 1", 5, 5, 0), (12, "y = 2", 7, 0, 7)])
    rows.insert(5, [" dtype=tl.int32)", "-", "-", "3", "3", "0", "0", "0", "0"])
    (launch,) = parse(rows)
    assert [(s.line, s.samples) for s in launch.lines] == [(10, 5), (12, 7)] and launch.unread == 1
    assert "### launch 0: _attn_partial_kernel, 12 samples (1 CSV rows unread: no line number)" in markdown([launch], 2)


def write(path, rows):
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL).writerows(rows)
    path.write_text(buf.getvalue())


@pytest.mark.parametrize(("rows", "message"), [
    ([["43", "def k("]], "row 1: a data row before its section's header"),
    ([["File Path", "/a/gate.py"], ["Function Name", "_k"], ["Line No", "Source", "# Samples"]],
     "row 3: no 'Warp Stall Sampling (All Samples)' column (profile with --set full)"),
    ([["Function Name", "_k"]], "row 1: a Function Name before any File Path"),
])
def test_malformed_files_are_one_line_and_exit_2(rows, message, tmp_path, capsys):
    path = tmp_path / "src.csv"
    write(path, rows)
    assert main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"benchmarks/ncu_source_lines.py: {path}: {message}\n"


def test_the_note_is_printed(tmp_path, capsys):
    path = tmp_path / "src.csv"
    write(path, ROWS)
    assert main([str(path), "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count("### launch") == 3 and "| 9 | 75% | mhc.py:410 |" in out
