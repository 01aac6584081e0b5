"""What a preference heatmap draws for one query: the zELOs and every judgement, read from an
annotated dataset (with its pairs file) or from a benchmark results file (one row's details).
The drawing itself is `ragmatrix.zelo.heatmap`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragmatrix.zelo.battles import zelo_details
from ragmatrix.zelo.zbench_format import DatasetError


@dataclass
class HeatmapData:
    zelo: dict[str, float]
    battles: list[tuple[str, str, float | None]]
    title: str


def load(source: Path, query: str, model: str | None = None, pairs: Path | None = None) -> HeatmapData:
    """From a results file (its lines carry a `family`) or an annotated dataset."""
    first = _first_line(source)
    if first is None:
        raise DatasetError(f"{source}: empty or not JSON lines")
    if "family" in first:
        return from_results(source, query, model)
    return from_annotated(source, query, pairs)


def _first_line(path: Path) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    value = json.loads(line)
                    return value if isinstance(value, dict) else None
    except OSError as error:
        raise DatasetError(f"{path}: cannot read ({error.strerror})") from None
    except ValueError:
        return None
    return None


def from_annotated(source: Path, query: str, pairs: Path | None = None) -> HeatmapData:
    """The query's scores from the annotated file, its judgements from the pairs file (the one
    beside it unless given)."""
    from ragmatrix.zelo import annotation, zbench_format

    items = {item.id: item for item in zbench_format.read(source, annotated=True)}
    if query not in items:
        raise DatasetError(f"{source}: no query {query!r}")
    pairs = pairs or annotation.pairs_path(source)
    if not pairs.is_file():
        raise DatasetError(f"{pairs}: no pairs file (give it with --pairs)")
    item = items[query]
    return HeatmapData(item.scores(), list(annotation.battles_of(pairs, query)), item.text)


def from_results(path: Path, item: str, model: str | None = None) -> HeatmapData:
    """The zELOs and battles of one row (item `case:variant`, and the model when several have
    rows for it) of a zelo_battles results file."""
    from ragmatrix.results.store import ResultStore

    rows = ResultStore(path.parent).load(path.stem).rows
    found = [r for r in rows if r.item == item and (model is None or r.model == model)]
    models = sorted({r.model for r in found})
    if not found:
        which = f" and model {model}" if model else ""
        raise DatasetError(f"{path}: no row for item {item!r}{which}")
    if len(models) > 1:
        raise DatasetError(f"{path}: item {item!r} has rows of several models ({', '.join(models)}): add --model")
    details = next((d for e in found[-1].iterations if (d := zelo_details(e.details)) is not None), None)
    if details is None:
        raise DatasetError(f"{path}: the row of {item!r} holds no zELOs (an error row?)")
    return HeatmapData(dict(details.zelo), list(details.battles), f"{item} - {models[0]}")
