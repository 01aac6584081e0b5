"""A reranker of models.yaml run over a zbench-format file, as zbench's rerankers annotate one
(`Zerank.annotate`): each query's documents scored, and written as an AnnotatedQueryDocuments
file whose `score` on each document is the reranker's relevance: the system file zbench's
benchmark functions read, and `rerank-eval` evaluates.

Resumable: the output is replaced whole (atomically) after every `every` queries, and a run
finds the queries an earlier one finished there (the same documents, each with a score) and
does not score them again; the rerank cache also keeps every pair already scored. A document
the model gave no valid relevance (an LLM's answer that does not parse) is left out of its line
and counted: a system file needs a number on each document, and none would be honest. The next
run asks for it again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragmatrix.zelo import zbench_format
from ragmatrix.zelo.zbench_format import SCALE_FIELD, DatasetError, QueryDocuments

if TYPE_CHECKING:
    from ragmatrix.models.protocols import Reranker

EVERY = 16  # queries scored between two writes of the output: what a killed run can lose


@dataclass
class FileRun:
    """What a run over a file did."""

    queries: int = 0
    scored: int = 0  # queries scored by this run
    resumed: int = 0  # queries found finished in the output
    documents: int = 0  # (query, document) pairs written
    invalid: dict[str, list[str]] = field(default_factory=dict)  # query id -> documents left out


def finished(source: list[QueryDocuments], out: Path) -> dict[str, dict[str, Any]]:
    """The output lines of an earlier run that are done: their query is in the source, with the
    same documents, each scored. An output that cannot be read is started afresh."""
    if not out.is_file():
        return {}
    try:
        earlier = {item.id: item for item in zbench_format.read(out, annotated=True)}
    except DatasetError:
        return {}
    done: dict[str, dict[str, Any]] = {}
    for item in source:
        line = earlier.get(item.id)
        if line is not None and line.document_ids == item.document_ids:
            done[item.id] = line.raw
    return done


def system_line(item: QueryDocuments, scores: list[float | None]) -> tuple[dict[str, Any], list[str]]:
    """The item's line with the reranker's scores (a ground truth's unit dropped), and the ids
    of the documents left out for want of a valid relevance."""
    raw = {key: value for key, value in item.raw.items() if key != SCALE_FIELD}
    documents, left_out = [], []
    for document, score in zip(item.documents, scores, strict=True):
        if score is None:
            left_out.append(str(document["id"]))
        else:
            documents.append({**document, "score": score})
    return {**raw, "documents": documents}, left_out


def rerank_file(
    reranker: Reranker,
    source: list[QueryDocuments],
    out: Path,
    every: int = EVERY,
    progress: Callable[[int], object] | None = None,
) -> FileRun:
    """Score every query of `source` with the reranker (those finished in `out` kept), writing
    `out` as it goes; `progress(n)` is told each batch of queries done."""
    done = finished(source, out)
    run = FileRun(queries=len(source), resumed=len(done))
    lines: dict[str, dict[str, Any]] = dict(done)
    waiting = [item for item in source if item.id not in done]
    for start in range(0, len(waiting), every):
        batch = waiting[start : start + every]
        answers = reranker.rerank_many([(item.text, item.contents) for item in batch])
        for item, scores in zip(batch, answers, strict=True):
            lines[item.id], left_out = system_line(item, scores)
            if left_out:
                run.invalid[item.id] = left_out
        run.scored += len(batch)
        # A line left with no document at all is no line of an annotated file.
        zbench_format.write(out, [lines[item.id] for item in source if lines.get(item.id, {}).get("documents")])
        if progress is not None:
            progress(len(batch))
    run.documents = sum(len(line["documents"]) for line in lines.values())
    return run
