"""zbench-format datasets: JSONL files of queries with their candidate documents.

One JSON object per line:

    {"query": {"id": "q1", "query": "..."},
     "documents": [{"id": "d1", "content": "...", "metadata": {...}}, ...]}

An annotated file (AnnotatedQueryDocuments) is the same with a `score` on each document. Any
other field is kept as it is. A malformed line is one error naming the file and the line.

`annotate` also records the unit of its scores on each line, `"zelo_scale": "z"` (natural-log
strengths, zbench's own unit) or `"elo"` (1000 + 400 z / ln 10); zbench's reader ignores the
field. `strengths()` reads a ground-truth line back in natural-log units, from the field or,
in a file without it, by recognising an Elo file (every query's scores average 1000).

The scored pairs can also be written in zbench's `ai_scores.json` shape (DatasetPairScoredPairs:
one JSON object holding `scored_pairs`, each a pair and the scores of its three judges), which
zbench's notebook reads.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragmatrix.foundations.atomic_write import write_atomically


class DatasetError(Exception):
    """A dataset that cannot be used; the message is one line naming the file and the line."""


@dataclass
class QueryDocuments:
    """One line of a dataset. `raw` is the line as read; writing goes back through it."""

    line: int
    raw: dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.raw["query"]["id"])

    @property
    def text(self) -> str:
        return str(self.raw["query"]["query"])

    @property
    def documents(self) -> list[dict[str, Any]]:
        return list(self.raw["documents"])

    @property
    def document_ids(self) -> list[str]:
        return [str(d["id"]) for d in self.raw["documents"]]

    @property
    def contents(self) -> list[str]:
        return [str(d["content"]) for d in self.raw["documents"]]

    def scores(self) -> dict[str, float]:
        """Document id -> score, for an annotated line, in the file's order."""
        return {str(d["id"]): float(d["score"]) for d in self.raw["documents"]}

    @property
    def scale(self) -> str | None:
        """The unit `annotate` recorded on the line ("z" or "elo"), None when none was."""
        value = self.raw.get(SCALE_FIELD)
        return None if value is None else str(value)


SCALE_FIELD = "zelo_scale"
SCALES = ("z", "elo")
ELO_MEAN = 1000.0
# An Elo file's scores average exactly 1000 per query (the fit is centred), rounded to 1e-6.
_ELO_MEAN_TOLERANCE = 1e-3


def looks_like_elo(items: list[QueryDocuments]) -> bool:
    """Whether a file without a recorded scale holds Elo ratings: every query's scores
    average 1000, as `annotate --scale elo` writes them."""
    means = [sum(s.values()) / len(s) for s in (item.scores() for item in items) if s]
    return bool(means) and all(abs(m - ELO_MEAN) < _ELO_MEAN_TOLERANCE for m in means)


def strengths(path: Path, items: list[QueryDocuments]) -> tuple[dict[str, dict[str, float]], str]:
    """Query id -> document id -> natural-log zELO, and the scale found ("z", "elo", or
    "elo (detected)"). A recorded scale wins; a file without one is Elo when it looks so."""
    from ragmatrix.stats.bradley_terry import from_elo

    detected = looks_like_elo([item for item in items if item.scale is None])
    found: dict[str, dict[str, float]] = {}
    scales: set[str] = set()
    for item in items:
        scale = item.scale
        if scale is not None and scale not in SCALES:
            raise DatasetError(f"{path}: line {item.line}: {SCALE_FIELD} {scale!r} is not one of {', '.join(SCALES)}")
        if scale is None:
            scale = "elo (detected)" if detected else "z"
        scales.add(scale)
        convert = from_elo if scale.startswith("elo") else float
        found[item.id] = {d: convert(v) for d, v in item.scores().items()}
    return found, ", ".join(sorted(scales)) or "z"


SCORE_FIELDS = ("openai_score", "gemini_score", "anthropic_score")


def write_scored_pairs(path: Path, scored_pairs: list[dict[str, Any]]) -> None:
    """zbench's ai_scores.json: `{"scored_pairs": [...]}`, written atomically. Each entry holds
    `pair` (pair_id, query_id, query, document_a and document_b, each with document_id,
    metadata and content) and one `{"thought", "score"}` per field of SCORE_FIELDS."""
    text = json.dumps({"scored_pairs": scored_pairs}, ensure_ascii=False, indent=1) + "\n"
    write_atomically(Path(path), text, make_folder=True)


def read(path: Path, annotated: bool = False) -> list[QueryDocuments]:
    """Every line of a dataset, checked; `annotated` requires a numeric score on each document."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise DatasetError(f"{path}: cannot read ({error.strerror})") from None
    items: list[QueryDocuments] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}: line {number}"
        try:
            raw = json.loads(line)
        except ValueError:
            raise DatasetError(f"{where}: not JSON") from None
        problem = _problem(raw, annotated)
        if problem:
            raise DatasetError(f"{where}: {problem}")
        item = QueryDocuments(number, raw)
        if item.id in seen:
            raise DatasetError(f"{where}: query id {item.id!r} appears twice")
        seen.add(item.id)
        items.append(item)
    return items


def _problem(raw: Any, annotated: bool) -> str | None:
    if not isinstance(raw, dict):
        return "expected a JSON object"
    query = raw.get("query")
    if not isinstance(query, dict) or "id" not in query or not isinstance(query.get("query"), str):
        return 'needs "query": {"id": ..., "query": "..."}'
    documents = raw.get("documents")
    if not isinstance(documents, list) or not documents:
        return 'needs a non-empty "documents" list'
    ids: set[str] = set()
    for index, document in enumerate(documents):
        if not isinstance(document, dict) or "id" not in document or not isinstance(document.get("content"), str):
            return f'document #{index + 1} needs "id" and "content"'
        if str(document["id"]) in ids:
            return f"document id {document['id']!r} appears twice"
        ids.add(str(document["id"]))
        if annotated:
            score = document.get("score")
            if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
                return f"document {document['id']!r} has no numeric score"
    return None


def write(path: Path, items: list[dict[str, Any]]) -> None:
    """Write lines atomically: a reader never sees a half-written file."""
    lines = (json.dumps(item, ensure_ascii=False) + "\n" for item in items)
    write_atomically(Path(path), lines, make_folder=True)
