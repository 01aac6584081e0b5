"""The leaderboard of pytest's terminal summary, remembered by what it is made of.

A run whose results did not change (every item cached) prints the summary the run before it
printed. Aggregating, pricing and rendering were most of such a run's work past collection, so
the lines are kept in the cache folder under the digest of their inputs: the stored rows and
cost records (by their bytes), models.yaml (its prices), the families shown, the options that
change the text, and the code (every source file of this package, by size and modification
time, and the statistics libraries' versions). Any change computes the summary again.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ragmatrix.foundations.atomic_write import write_atomically
from ragmatrix.foundations.cache import cache_dir
from ragmatrix.results.store import Loaded, ResultStore
from ragmatrix.seam.family import Family

FILE = "summary.json"
_PACKAGE = Path(__file__).resolve().parents[1]


@dataclass
class Summary:
    notes: list[str]  # models left out of a table, one line each
    cost_problems: list[str]  # unreadable cost records, one line each
    lines: list[str]  # the tables


@dataclass
class SummaryInputs:
    """What the summary is made of: every stored row (`loaded`, as `store` just loaded them),
    the families they belong to, the cost records beside them and the options that shape it."""

    store: ResultStore
    loaded: Mapping[str, Loaded]
    families: Mapping[str, Family]
    results_dir: Path
    models_file: Path
    variants: bool


def leaderboard_summary(inputs: SummaryInputs) -> Summary:
    """The summary of these inputs, remembered or made now."""
    key = _digest(inputs)
    path = cache_dir() / FILE
    remembered = _read(path, key)
    if remembered is not None:
        return remembered
    summary = _made(inputs)
    try:
        write_atomically(path, json.dumps({"key": key, **summary.__dict__}), make_folder=True)
    except OSError:
        pass  # a summary that cannot be kept is made again next time
    return summary


def _made(inputs: SummaryInputs) -> Summary:
    from ragmatrix.report import remembered_stats
    from ragmatrix.report.aggregate import aggregate
    from ragmatrix.report.cost import load_costs
    from ragmatrix.report.terminal import render

    remembered = remembered_stats()
    rows = {family: data.rows for family, data in inputs.loaded.items() if data.rows}
    tables = aggregate(rows, inputs.families, memo=remembered, variants=inputs.variants)
    remembered.save()
    costs, cost_problems = load_costs(tables, inputs.results_dir, inputs.models_file, remember=True)
    lines = (
        render(tables, inputs.families, variants=inputs.variants, costs=costs)
        if tables.families
        else ["no results yet"]
    )
    return Summary([left.note() for left in tables.left_out], cost_problems, lines)


def _read(path: Path, key: str) -> Summary | None:
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        if kept.get("key") != key:
            return None
        return Summary(*(list(map(str, kept[name])) for name in ("notes", "cost_problems", "lines")))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None  # none yet, or unreadable: made again


def _digest(inputs: SummaryInputs) -> str:
    digest = hashlib.blake2b()

    def add(*parts: object) -> None:
        digest.update(repr(parts).encode("utf-8", "backslashreplace") + b"\0")

    add("variants", inputs.variants)
    for name in sorted(inputs.loaded):  # the rows, by the bytes the store read
        add("rows", name, inputs.store.read_digest(name))
    for name, family in sorted(inputs.families.items()):
        add("family", name, type(family).__module__, family.scoring_version)
    for path in [inputs.models_file, *sorted((inputs.results_dir / "costs").glob("*.jsonl"))]:
        try:
            add("file", path.name, hashlib.blake2b(path.read_bytes()).hexdigest())
        except OSError as error:
            add("file", path.name, error.errno)
    add("code", _code_stamp())
    return digest.hexdigest()


def _code_stamp() -> tuple[object, ...]:
    """This package's source files by size and modification time, and the statistics code's
    version (it covers the libraries that compute the intervals)."""
    from ragmatrix.stats import code_version

    files = []
    for folder, _, names in sorted(os.walk(_PACKAGE)):
        for name in sorted(names):
            if name.endswith(".py"):
                status = os.stat(os.path.join(folder, name))
                files.append(
                    (os.path.relpath(os.path.join(folder, name), _PACKAGE), status.st_size, status.st_mtime_ns)
                )
    return (code_version(), tuple(files))
