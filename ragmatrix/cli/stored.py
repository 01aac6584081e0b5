"""The stored items of a results folder, each with its family and the case it was run on: what
`view`, `show` and `export` read.

The results folder is the one given, else `benchmark/results` found from here upward; the
cases come from the data files given with `--data-dir`, else those beside the results
(`<results>/../data`), else the project's `benchmark/data` found from here upward. Load them
inside the project's run (`start_run`), which `run_in_project` starts.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragmatrix.cli.locate import add_results_dir

if TYPE_CHECKING:
    from ragmatrix.explore.items import StoredItem
    from ragmatrix.results.rows import Row
    from ragmatrix.seam.family import Family


@dataclass
class Stored:
    results: Path
    shown_as: str  # the results folder as the user would name it
    rows: dict[str, list[Row]]
    families: dict[str, Family[Any, Any]]
    items: list[StoredItem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # unreadable lines, data file problems


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_results_dir(parser)
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="the data files the results were run on (default: data/ beside the results folder, else "
        "benchmark/data looked for from here upward)",
    )


def results_of(args: argparse.Namespace) -> Path:
    from ragmatrix.cli import CommandError
    from ragmatrix.cli.locate import NotFound, results_folder

    try:
        results: Path = results_folder(args.results_dir)
    except NotFound as error:
        raise CommandError(str(error)) from None
    if not results.is_dir():
        raise CommandError(f"{results}: no such results folder")
    return results


@contextmanager
def run_in_project(results: Path) -> Iterator[None]:
    """The project's run: its caches, and the values of the variables its models.yaml names
    redacted from everything shown."""
    from ragmatrix.cli.locate import project_root
    from ragmatrix.cli.report import found_models_file, refer_to_models_file
    from ragmatrix.foundations.context import start_run

    models = found_models_file()  # as the report finds it: a results folder anywhere works
    with start_run(project_root(models if models is not None else results.parent / "models.yaml")):
        refer_to_models_file(results, models)
        yield


def load(args: argparse.Namespace, results: Path, with_cases: bool = True) -> Stored:
    """Every stored row with its family and, where the data files hold it, its case."""
    from ragmatrix.cli import CommandError
    from ragmatrix.cli.locate import RESULTS_DIR
    from ragmatrix.explore.items import join
    from ragmatrix.families import all_families
    from ragmatrix.report import load as load_rows
    from ragmatrix.suite.lookup import find_cases

    rows, problems = load_rows(results)
    if not rows:
        raise CommandError(f"{results}: no result rows (run `pytest benchmark` first)")
    shown = str(args.results_dir) if args.results_dir is not None else RESULTS_DIR.as_posix()
    families = all_families()
    stored = Stored(results, shown, rows, families, notes=[f"unreadable: {p}" for p in problems])
    cases = {}
    if with_cases:
        data_dir = _data_dir(args.data_dir, results)
        if args.data_dir is not None and not data_dir.is_dir():
            raise CommandError(f"--data-dir {data_dir}: no such folder")
        found = find_cases(data_dir, root=data_dir.parent.parent)
        cases = found.cases
        stored.notes += found.problems
        if not data_dir.is_dir():
            stored.notes.append(f"no data files at {data_dir}: items show what their rows recorded only")
    stored.items = join(rows, families, cases)
    return stored


def _data_dir(given: Path | None, results: Path) -> Path:
    """The data files: those given, else `data/` beside the results folder, else the project's
    `benchmark/data` found from here upward (results written elsewhere with --results-dir)."""
    from ragmatrix.cli.locate import MODELS_FILE, NotFound, find_upward

    if given is not None:
        return given
    beside = results.parent / "data"
    if beside.is_dir():
        return beside
    try:
        return find_upward(MODELS_FILE.parent / "data", Path.cwd().resolve(), folder=True)
    except NotFound:
        return beside
