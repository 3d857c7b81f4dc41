"""Write the testbed test sets: ``python -m tasks.testbed.generate --out tasks/data/testbed``.

The files are a pure function of the code (``tasks.testbed.spec`` parameters and
seeds), so regenerating is how they were made and how a test proves they were not
edited by hand. After a deliberate change, regenerate, put the printed hashes into
``tasks/data_files.py`` and bump the task versions in ``tasks/CHANGELOG.md``.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path, PurePosixPath

from tasks.data_files import TESTBED_FILES
from tasks.testbed.catalog import ALL_TASKS
from tasks.testbed.testset import jsonl_bytes


def file_name(task_name: str) -> str:
    """The file's path inside the testbed data folder (e.g. ``lookup.jsonl``,
    ``probes/chunk.jsonl``)."""
    return str(PurePosixPath(TESTBED_FILES[task_name].relpath).relative_to("testbed"))


def write_all(out: Path) -> dict[str, str]:
    """Write every test set into ``out``; the sha256 of each file, by file name."""
    out.mkdir(parents=True, exist_ok=True)
    hashes = {}
    for name in ALL_TASKS:
        payload = jsonl_bytes(name)
        (out / file_name(name)).parent.mkdir(parents=True, exist_ok=True)
        (out / file_name(name)).write_bytes(payload)
        hashes[file_name(name)] = hashlib.sha256(payload).hexdigest()
    return hashes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tasks.testbed.generate",
                                     description="Write the testbed test sets as JSONL.")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    args = parser.parse_args(argv)
    for name, digest in write_all(args.out).items():
        print(f"{args.out / name}  sha256 {digest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
