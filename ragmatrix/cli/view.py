"""Write the explorer: one self-contained HTML page over a results folder. Per family, a grid
of cases (and variants) by models, each cell coloured by its score, errors and invalid
answers marked, with filters (model, variant, status, failing only, text search); a cell
opens its item: the messages sent and the raw answer, the ranked files and chunks, the
pairwise judgements, the scores per length, every iteration. The page opens from file://
with no network.

examples:
  ragmatrix view                                   # benchmark/results/report/explorer.html
  ragmatrix view --out /tmp/explorer.html
  ragmatrix view --compare old/results             # and what changed per case, regressions first
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "view"
HELP = "the explorer page: every stored item, its answer and how it scored, in one HTML file"
FILE_NAME = "explorer.html"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ragmatrix.cli import stored

    stored.add_arguments(parser)
    parser.add_argument("--out", type=Path, default=None, help=f"the page (default RESULTS_DIR/report/{FILE_NAME})")
    parser.add_argument(
        "--compare", type=Path, default=None, metavar="OLD_RESULTS", help="list what changed since these results"
    )


def run(args: argparse.Namespace) -> int:
    from ragmatrix.cli import CommandError, stored
    from ragmatrix.explore.compare import changes
    from ragmatrix.explore.page import PageData, write_page
    from ragmatrix.foundations.atomic_write import write_atomically
    from ragmatrix.report import load as load_rows

    results = stored.results_of(args)
    if args.compare is not None and not args.compare.is_dir():
        raise CommandError(f"--compare {args.compare}: no such results folder")
    with stored.run_in_project(results):
        found = stored.load(args, results)
        data = PageData("ragmatrix explorer", found.shown_as, found.items, notes=found.notes)
        if args.compare is not None:
            old_rows, problems = load_rows(args.compare)
            data.compared_with = str(args.compare)
            data.changes = changes(old_rows, found.rows, found.families)
            data.notes += [f"unreadable in {args.compare}: {p}" for p in problems]
        page = write_page(data)
    out: Path = args.out or results / "report" / FILE_NAME
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(out, page)
    except OSError as error:
        raise CommandError(f"{out}: cannot write the page ({error.strerror or error})") from None
    for note in found.notes:
        print(f"note: {note}")
    compared = f", {len(data.changes)} changed item(s) since {args.compare}" if args.compare is not None else ""
    print(f"wrote {out}: {len(found.items)} items of {len(found.rows)} families{compared}")
    return 0
