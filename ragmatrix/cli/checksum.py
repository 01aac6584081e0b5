"""Write or verify the sha256 checksums of a results folder.

The checksum of a result file is the sha256 of its rows' canonical JSON (sorted keys, fixed
separators, one row per line, the lines sorted), so reformatting or reordering a file changes
nothing while any edited value, a hand-edited score included, is caught. The checksums live in
RESULTS_DIR/checksums.json.

Without a checksum file, the command writes one. With one, it verifies the rows against it and
exits with status 1 naming every file that changed. After a benchmark run that changed results
on purpose, write it again with --write.

examples:
  ragmatrix checksum benchmark/results            # verify (or write the first time)
  ragmatrix checksum benchmark/results --write    # record the current rows
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "checksum"
HELP = "write or verify sha256 checksums over the canonical JSON of the result rows"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results_dir", type=Path, help="the results folder, e.g. benchmark/results")
    parser.add_argument("--write", action="store_true", help="record the current rows, replacing the checksum file")


def run(args: argparse.Namespace) -> int:
    from ragmatrix.cli import CommandError
    from ragmatrix.results import checksum

    directory: Path = args.results_dir
    if not directory.is_dir():
        raise CommandError(f"{directory}: no such results folder")
    digests = checksum.compute(directory)
    if not digests:
        raise CommandError(f"{directory}: no result files (*.jsonl)")
    path = directory / checksum.FILE_NAME
    if args.write or not path.exists():
        checksum.write(directory)
        rows = sum(d.rows for d in digests.values())
        print(f"wrote {path}: {len(digests)} file(s), {rows} rows")
        return 0
    try:
        problems = checksum.verify(directory)
    except ValueError as error:
        raise CommandError(str(error)) from None
    for problem in problems:
        print(f"checksum mismatch: {problem}")
    if problems:
        print(f"{len(problems)} problem(s); if the changes are intended: ragmatrix checksum {directory} --write")
        return 1
    print(f"ok: {len(digests)} file(s), {sum(d.rows for d in digests.values())} rows match {path}")
    return 0
