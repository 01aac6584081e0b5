"""The stored results as data for other tools: flat rows (one per item and iteration) for CSV,
Parquet and pandas, and TREC run and qrels files for the retrieval families.

Flat rows have fixed columns (the item's names, status and counts, the iteration's score,
validity, reason and error, its time, the row's provenance), one column per metric
(`metric.<name>`) and per usage count (`usage.<name>`), and the family's own fields of the
iteration as one JSON text (`details`). CSV needs nothing; Parquet needs pyarrow, and a data
frame pandas (`pip install 'ragmatrix[export]'`).

TREC files follow trec_eval's formats, which ranx and pytrec_eval read: per retrieval family,
`qrels.txt` (`query 0 document grade`) and one run file per model (`query Q0 document rank
score model`). A query is an item (`case:variant`), so that a model's nDCG@10 over its run
file is the mean the leaderboard shows. Only the rows the leaderboard counts are written (its
row selection), each with its first iteration's ranking (retrieval rankings do not vary
between iterations). Scores are the stored ones (rounded to 4 decimals); where rounding made
two equal, the later is lowered by a millionth, so that every evaluator reads the order the
benchmark ranked in. Document ids with white space have it percent-encoded, the same way in
both files.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragmatrix.explore.items import StoredItem
from ragmatrix.report.aggregate import select
from ragmatrix.results.rows import Row
from ragmatrix.seam.family import Family

if TYPE_CHECKING:
    import pandas

FIXED_COLUMNS = (
    "family",
    "test",
    "model",
    "case",
    "variant",
    "item",
    "key",
    "scoring_version",
    "status",
    "item_score",
    "item_errors",
    "item_invalid",
    "iterations",
    "iteration",
    "score",
    "valid",
    "invalid_reason",
    "error",
    "duration_s",
    "recorded_at",
    "row_format",
    "ragmatrix_version",
    "commit",
    "dirty",
)
INSTALL = "pip install 'ragmatrix[export]'"
TIE_STEP = 1e-6
_SPACE = re.compile(r"\s")


class MissingLibrary(Exception):
    """An optional library an export needs is not installed; the message names the pip command."""


# --- flat rows -----------------------------------------------------------------------------------


def flat_rows(rows: Iterable[Row]) -> list[dict[str, Any]]:
    """One dict per item and iteration (an item without iterations gives one, iteration None)."""
    out = []
    for row in rows:
        base: dict[str, Any] = {
            "family": row.family,
            "test": row.test,
            "model": row.model,
            "case": row.case,
            "variant": row.variant,
            "item": row.item,
            "key": row.key,
            "scoring_version": str(row.scoring_version),
            "status": row.status,
            "item_score": row.item_score(),
            "item_errors": row.errors,
            "item_invalid": row.invalid,
            "iterations": row.iteration_count,
            "recorded_at": row.recorded_at,
            "row_format": row.provenance.format,
            "ragmatrix_version": row.provenance.ragmatrix,
            "commit": row.provenance.commit,
            "dirty": row.provenance.dirty,
        }
        base |= {f"usage.{name}": value for name, value in sorted(row.usage.items())}
        for index, iteration in enumerate(row.iterations or [None], start=1):  # type: ignore[list-item]
            line = dict(base, iteration=None if iteration is None else index)
            if iteration is not None:
                line |= {
                    "score": iteration.score,
                    "valid": iteration.valid,
                    "invalid_reason": iteration.invalid_reason,
                    "error": iteration.error,
                    "duration_s": iteration.duration_s,
                    "details": json.dumps(iteration.details, ensure_ascii=False, sort_keys=True),
                }
                line |= {f"metric.{name}": value for name, value in sorted(iteration.numeric_metrics().items())}
            out.append(line)
    return out


def columns(lines: Iterable[dict[str, Any]]) -> list[str]:
    """The fixed columns, then every metric and usage column that some line has, then details."""
    extra = sorted({name for line in lines for name in line if name not in FIXED_COLUMNS and name != "details"})
    metrics = [name for name in extra if name.startswith("metric.")]
    return [*FIXED_COLUMNS, *metrics, *(name for name in extra if name not in metrics), "details"]


def write_csv(lines: list[dict[str, Any]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns(lines), extrasaction="raise")
        writer.writeheader()
        writer.writerows(lines)
    return path


def write_parquet(lines: list[dict[str, Any]], path: Path) -> Path:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingLibrary(f"Parquet needs pyarrow: {INSTALL}") from None
    names = columns(lines)
    table = pa.table({name: [line.get(name) for line in lines] for name in names})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def data_frame(lines: list[dict[str, Any]]) -> pandas.DataFrame:
    try:
        import pandas
    except ImportError:
        raise MissingLibrary(f"a data frame needs pandas: {INSTALL}") from None
    return pandas.DataFrame(lines, columns=columns(lines))


def load_results(path: str | Path) -> pandas.DataFrame:
    """A results folder (`benchmark/results`) as a pandas DataFrame: one row per stored item and
    iteration, with the columns `ragmatrix export` writes. Unreadable lines are left out, as
    the leaderboard leaves them out."""
    from ragmatrix.results.store import ResultStore

    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such results folder")
    loaded = ResultStore(folder).load_all()
    return data_frame(flat_rows(row for family in loaded.values() for row in family.rows))


# --- TREC run and qrels files --------------------------------------------------------------------


@dataclass
class TrecFiles:
    written: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def write_trec(items: list[StoredItem], families: Mapping[str, Family[Any, Any]], out: Path) -> TrecFiles:
    """Under `out/<family>/`: `qrels.txt` and `<model>.run`, for each family that declares its
    rankings; the rows written are those the leaderboard counts."""
    result = TrecFiles()
    by_family: dict[str, list[StoredItem]] = {}
    for item in items:
        by_family.setdefault(item.row.family, []).append(item)
    for name, family_items in sorted(by_family.items()):
        family = families.get(name)
        if family is None or family.rankings is None:
            continue
        counted = {id(row) for row in select({name: [i.row for i in family_items]}).rows.get(name, [])}
        kept = [item for item in family_items if id(item.row) in counted and item.row.ok]
        without_case = sorted({item.row.item for item in kept if item.case is None})
        if without_case:
            result.notes.append(
                f"{name}: {len(without_case)} item(s) have no case in the data files (such as {without_case[0]}): "
                "left out of its run and qrels files"
            )
        judged = [(item, item.case) for item in kept if item.case is not None]
        if not judged:
            continue
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        qrels: dict[str, dict[str, int]] = {}
        runs: dict[str, list[str]] = {}
        several = 0
        for item, case in judged:
            query = item.row.item
            qrels.setdefault(query, {_doc(doc): grade for doc, grade in family.rankings.judged(case).items()})
            scored = [entry for entry in item.row.iterations if entry.error is None]
            several += len(scored) > 1
            ranking = family.rankings.ranked(scored[0]) if scored else []
            runs.setdefault(_tag(item.row.model), []).extend(_run_lines(query, ranking, _tag(item.row.model)))
        if several:
            result.notes.append(f"{name}: {several} item(s) ran several iterations; the run files hold the first")
        path = folder / "qrels.txt"
        path.write_text(
            "".join(
                f"{q} 0 {doc} {grade}\n" for q, judged in sorted(qrels.items()) for doc, grade in sorted(judged.items())
            ),
            encoding="utf-8",
        )
        result.written.append(path)
        for model, lines in sorted(runs.items()):
            path = folder / f"{model}.run"
            path.write_text("".join(lines), encoding="utf-8")
            result.written.append(path)
    return result


def _run_lines(query: str, ranking: list[tuple[str, float]], tag: str) -> list[str]:
    lines = []
    previous: float | None = None
    for rank, (doc, score) in enumerate(ranking, start=1):
        value = score if previous is None or score < previous else previous - TIE_STEP
        lines.append(f"{query} Q0 {_doc(doc)} {rank} {value:.6f} {tag}\n")
        previous = value
    return lines


def _doc(doc: str) -> str:
    """A document id as one whitespace-free TREC field."""
    return (
        _SPACE.sub(lambda space: f"%{ord(space.group()):02X}", doc.replace("%", "%25")) if _SPACE.search(doc) else doc
    )


def _tag(model: str) -> str:
    return _SPACE.sub("_", model) or "model"
