"""Merge result stores from several machines into one folder.

Each machine runs part of the matrix (`pytest benchmark --models X` on a GPU box, `--models Y`
on a laptop) and keeps its own results folder. This command unions their rows with the rows
the target folder already holds (it takes part as if named as a source, so nothing stored
there is lost): one row per item (test, model, item), a result over an error row, then the
newest; the files are written compacted and sorted. Two results for one item that disagree
(another result key or another score) are reported as conflicts; the newest is kept. Lines that
cannot be read are not copied and are reported. Exit status 1 when there were conflicts or
unreadable lines.
The cost records (`costs/`) are combined by counts, per family, model and device; none is dropped.

examples:
  ragmatrix merge gpu-box/results laptop/results --into benchmark/results
  ragmatrix merge other/results --into benchmark/results
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "merge"
HELP = "merge results folders from several machines into one, with its own rows: one row per item, newest wins"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sources", type=Path, nargs="+", help="results folders to merge")
    parser.add_argument(
        "--into", type=Path, required=True, help="the folder to write; the rows it holds are merged with, not replaced"
    )


def run(args: argparse.Namespace) -> int:
    from ragmatrix.cli import CommandError
    from ragmatrix.results.merge import UnreadableTarget, merge_stores

    try:
        report = merge_stores(args.sources, args.into)
    except (FileNotFoundError, UnreadableTarget) as error:
        raise CommandError(str(error)) from None
    for problem in report.problems:
        print(f"ignored: {problem}")
    for conflict in report.conflicts:
        print(f"conflict: {conflict}")
    for note in report.cost_notes:
        print(f"note: {note}")
    total = sum(report.rows.values())
    families = ", ".join(f"{family} {count}" for family, count in report.rows.items()) or "none"
    folders = f"{len(args.sources)} folder{'s' if len(args.sources) != 1 else ''}"
    records = sum(report.costs.values())
    print(f"merged {folders} into {args.into}: {total} rows ({families}), {records} cost records")
    if report.kept_from_target:
        held = sum(report.kept_from_target.values())
        print(f"the {held} rows {args.into} held before took part in the merge")
    if report.untouched:
        print(f"left as they were (no source holds them): {', '.join(report.untouched)}")
    if report.problems:
        print(f"{len(report.problems)} unreadable line(s) were not merged (see 'ignored:' above)")
    return 1 if report.conflicts or report.problems else 0
