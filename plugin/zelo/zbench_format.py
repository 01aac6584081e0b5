"""zbench-format datasets: JSONL files of queries with their candidate documents.

One JSON object per line:

    {"query": {"id": "q1", "query": "..."},
     "documents": [{"id": "d1", "content": "...", "metadata": {...}}, ...]}

An annotated file (AnnotatedQueryDocuments) is the same with a `score` on each document. Any
other field is kept as it is. A malformed line is one error naming the file and the line.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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
        """Document id -> score, for an annotated line."""
        return {str(d["id"]): float(d["score"]) for d in self.raw["documents"]}


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
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        for item in items:
            handle.write(json.dumps(item, ensure_ascii=False) + "\n")
    os.replace(temporary, path)
