"""Finding the project's files from any working directory inside it."""

from __future__ import annotations

import argparse
from pathlib import Path

MODELS_FILE = Path("benchmark/models.yaml")
RESULTS_DIR = Path("benchmark/results")


class NotFound(Exception):
    """No such file; the message names every path tried."""


def find_upward(relative: Path, start: Path, folder: bool = False) -> Path:
    """`start/relative`, else the same under each folder above `start`: the first file (or,
    with `folder`, the first folder) that exists. NotFound names the paths tried."""
    tried: list[Path] = []
    for above in [start, *start.parents]:
        candidate = above / relative
        if candidate.is_dir() if folder else candidate.is_file():
            return candidate
        tried.append(candidate)
    raise NotFound(f"no {relative} here or in a folder above (tried {', '.join(str(p) for p in tried)})")


def models_file(given: Path | None, start: Path | None = None) -> Path:
    """The models file: the one given with --models-file, else benchmark/models.yaml found from
    the working directory upward."""
    if given is not None:
        if not given.is_file():
            raise NotFound(f"--models-file {given}: file not found")
        return given
    try:
        return find_upward(MODELS_FILE, (start or Path.cwd()).resolve())
    except NotFound as error:
        raise NotFound(f"{error}; give the file with --models-file") from None


def add_results_dir(parser: argparse.ArgumentParser) -> None:
    """`--results-dir`, as every command reading stored results takes it (see `results_folder`)."""
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=None,
        help="the results (default benchmark/results, looked for from here upward)",
    )


def results_folder(given: Path | None, start: Path | None = None) -> Path:
    """The results folder: the one given with --results-dir, else benchmark/results found from
    the working directory upward, so a command works from any folder of the project."""
    if given is not None:
        return given
    try:
        return find_upward(RESULTS_DIR, (start or Path.cwd()).resolve(), folder=True)
    except NotFound as error:
        raise NotFound(f"{error}; give the folder with --results-dir") from None


def project_root(models: Path) -> Path:
    """The folder holding benchmark/ when the models file is benchmark/models.yaml, else the
    working directory: where .env and .benchmark_cache live."""
    models = models.resolve()
    if models.parent.name == MODELS_FILE.parent.name:
        return models.parent.parent
    return Path.cwd()
