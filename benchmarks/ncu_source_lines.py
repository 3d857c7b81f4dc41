"""Where a kernel's warps wait, per source line: Nsight Compute's stall samples summed per
Python line of a Triton kernel, for each profiled launch.

ncu's details page says how long a launch took and how often its warps issue; it does not
say which line of the kernel they wait on. Its source page does (``--set full`` or the
SourceCounters section, ``--import-source yes``), as a CSV with one row per kernel source
line followed by that line's SASS rows. Triton keeps line info, so the lines are the
kernel's own Python (and Triton's ``standard.py`` for ``tl.max`` / ``tl.sum``):

    ncu --set full --import-source yes -o src python benchmarks/profile_ops.py gate:mid:1
    ncu -i src.ncu-rep --page source --print-source cuda,sass --csv > src.csv
    python benchmarks/ncu_source_lines.py src.csv [--top 12]

The CSV names no launch: each launch's rows come as one section per source file, Triton's
standard library first when the kernel calls it. A launch therefore starts at a
``standard.py`` section, or at a kernel-file section that does not follow one (how ncu
2025 writes it; benchmarks/h200_checklist.sh part 8 made the file read in
benchmarks/results/ncu_h200_session16.md). Samples are taken across all warps of all
programs, so a launch's many programs outweigh the one program on its critical path (a
ticket-holder's tail): read the shares with the grid in mind.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

LIBRARY_FILE = "standard.py"  # Triton's standard library (tl.max, tl.sum, ...)
SAMPLES = "Warp Stall Sampling (All Samples)"


@dataclass
class SourceLine:
    file: str
    line: int
    text: str
    samples: int
    stalls: Counter


@dataclass
class Launch:
    kernel: str
    lines: list[SourceLine] = field(default_factory=list)
    unread: int = 0  # data rows without a line number (a malformed row), counted in the note

    @property
    def samples(self) -> int:
        return sum(s.samples for s in self.lines)


def _count(value: str) -> int:
    return int(value) if value not in ("", "-") else 0


def read_rows(text: str) -> list[list[str]]:
    """The CSV's rows. ncu quotes every field but does not escape a quote inside one (a
    kernel line such as ``tl.inline_asm_elementwise(asm, "=r,l", ...)``), which a CSV
    reader splits at the inner quotes; each field is quoted, so a row is its line
    without the outer quotes split at ``","``. A line not written that way goes to the
    CSV reader."""
    rows = []
    for line in text.splitlines():
        if len(line) >= 2 and line[0] == line[-1] == '"':
            rows.append(line[1:-1].split('","'))
        else:
            rows.extend(csv.reader([line]))
    return rows


def parse(rows: list[list[str]], where: str = "csv") -> list[Launch]:
    """Launches of an ncu source-page CSV (``rows`` as read by ``csv.reader``); a malformed
    file raises ValueError naming ``where`` and what was expected."""
    launches: list[Launch] = []
    file = header = None
    previous = None
    for number, row in enumerate(rows, 1):
        if not row:
            continue
        if row[0] == "File Path":
            file = Path(row[1]).name
            continue
        if row[0] == "Function Name":
            if file is None:
                raise ValueError(f"{where}: row {number}: a Function Name before any File Path")
            if file == LIBRARY_FILE or previous != LIBRARY_FILE:
                launches.append(Launch(row[1]))
            previous = file
            continue
        if row[0] == "Line No":
            if SAMPLES not in row:
                raise ValueError(f"{where}: row {number}: no {SAMPLES!r} column (profile with --set full)")
            header = row
            continue
        if header is None or not launches:
            raise ValueError(f"{where}: row {number}: a data row before its section's header")
        if not row[0]:
            continue  # a SASS row: its samples are already in its source line's row
        if not row[0].isdigit():  # no line number: a row read_rows could not split
            launches[-1].unread += 1
            continue
        stalls = Counter({name[len("stall_"):]: _count(row[i]) for i, name in enumerate(header)
                          if name.startswith("stall_") and "Not Issued" not in name and i < len(row)})
        launches[-1].lines.append(SourceLine(file, int(row[0]), row[1].strip(), _count(row[header.index(SAMPLES)]),
                                             +stalls))
    return launches


def markdown(launches: list[Launch], top: int) -> str:
    out = []
    for n, launch in enumerate(launches):
        total = launch.samples
        unread = f" ({launch.unread} CSV rows unread: no line number)" if launch.unread else ""
        out += [f"### launch {n}: {launch.kernel}, {total} samples{unread}", "",
                "| samples | share | line | source | top stall reasons |", "|---:|---:|---|---|---|"]
        for s in sorted(launch.lines, key=lambda s: -s.samples)[:top]:
            if not s.samples:
                break
            reasons = ", ".join(f"{k} {v}" for k, v in s.stalls.most_common(3))
            text = s.text.replace("|", "\\|")[:80]
            out.append(f"| {s.samples} | {s.samples / total:.0%} | {s.file}:{s.line} | `{text}` | {reasons} |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", type=Path, help="ncu -i REP --page source --print-source cuda,sass --csv")
    parser.add_argument("--top", type=int, default=12, help="source lines per launch (default: 12)")
    args = parser.parse_args(argv)
    try:
        launches = parse(read_rows(args.csv.read_text()), str(args.csv))
    except (OSError, ValueError, UnicodeDecodeError) as e:
        print(f"benchmarks/ncu_source_lines.py: {e}", file=sys.stderr)
        return 2
    print(markdown(launches, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
