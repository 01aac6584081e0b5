"""Merge result stores from several machines into one folder.

Each machine runs part of the matrix (`pytest benchmark --models X` on a GPU box, `--models Y`
on a laptop) and keeps its own results folder. This command unions their rows: one row per
item (test, model, item), a result over an error row, then the newest; the files are written
compacted and sorted. Two results for one item that disagree (another result key or another
score) are reported as conflicts; the newest is kept. Exit status 1 when there were conflicts.
The cost records (`costs/`) are combined by counts, per family, model and device; none is dropped.

examples:
  ragmatrix merge gpu-box/results laptop/results --into benchmark/results
  ragmatrix merge benchmark/results other/results --into benchmark/results
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "merge"
HELP = "merge results folders from several machines: one row per item, newest wins, conflicts reported"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sources", type=Path, nargs="+", help="results folders to merge")
    parser.add_argument("--into", type=Path, required=True, help="the folder to write (may be one of the sources)")


def run(args: argparse.Namespace) -> int:
    from ragmatrix.cli import CommandError
    from ragmatrix.merge import merge_stores

    try:
        report = merge_stores(args.sources, args.into)
    except FileNotFoundError as error:
        raise CommandError(str(error)) from None
    for problem in report.problems:
        print(f"ignored: {problem}")
    for conflict in report.conflicts:
        print(f"conflict: {conflict}")
    for note in report.cost_notes:
        print(f"note: {note}")
    total = sum(report.rows.values())
    families = ", ".join(f"{family} {count}" for family, count in report.rows.items()) or "none"
    records = sum(report.costs.values())
    print(f"merged {len(args.sources)} folders into {args.into}: {total} rows ({families}), {records} cost records")
    return 1 if report.conflicts else 0
