"""Export the stored results as data: CSV and Parquet with one row per item and iteration
(flat columns: the item's names and status, the iteration's score, validity, reason and error,
each metric as `metric.<name>`, usage counts, provenance, and the family's own fields as JSON),
and TREC run and qrels files of the retrieval families, which trec_eval, ranx and pytrec_eval
read: each model's nDCG@10 over its run file is its leaderboard mean.

Parquet needs pyarrow (`pip install 'ragmatrix[export]'`). In Python,
`ragmatrix.load_results("benchmark/results")` gives the same rows as a pandas DataFrame.

examples:
  ragmatrix export                                 # RESULTS_DIR/export/items.csv
  ragmatrix export --parquet --trec --out /tmp/out
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "export"
HELP = "the results as CSV, Parquet, and TREC run and qrels files"
FOLDER = "export"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ragmatrix.cli import stored

    parser.add_argument("--csv", action="store_true", help="items.csv (the default when no format is named)")
    parser.add_argument("--parquet", action="store_true", help="items.parquet (needs pyarrow)")
    parser.add_argument("--trec", action="store_true", help="trec/<family>/qrels.txt and <model>.run")
    parser.add_argument("--out", type=Path, default=None, help=f"the folder written (default RESULTS_DIR/{FOLDER})")
    stored.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ragmatrix.cli import CommandError, stored
    from ragmatrix.explore import export
    from ragmatrix.foundations.secrets import redact

    wanted_csv = args.csv or not (args.parquet or args.trec)
    results = stored.results_of(args)
    out: Path = args.out or results / FOLDER
    written: list[Path] = []
    notes: list[str] = []
    with stored.run_in_project(results):
        found = stored.load(args, results, with_cases=args.trec)
        lines = export.flat_rows(item.row for item in found.items)
        for line in lines:  # rows hold no secrets, but rows written by an older version might
            for name, value in line.items():
                if isinstance(value, str):
                    line[name] = redact(value)
        try:
            if wanted_csv:
                written.append(export.write_csv(lines, out / "items.csv"))
            if args.parquet:
                written.append(export.write_parquet(lines, out / "items.parquet"))
            if args.trec:
                trec = export.write_trec(found.items, found.families, out / "trec")
                written += trec.written
                notes += trec.notes
                if not trec.written:
                    notes.append("no retrieval family's rows (or cases) to write as TREC files")
        except export.MissingLibrary as error:
            raise CommandError(str(error)) from None
        except OSError as error:
            raise CommandError(f"{out}: cannot write ({error.strerror or error})") from None
    for note in [*found.notes, *notes]:
        print(f"note: {note}")
    print(f"wrote {len(written)} file(s) in {out}: {len(lines)} rows (items x iterations) of {len(found.items)} items")
    return 0
