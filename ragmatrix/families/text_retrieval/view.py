"""What a text retrieval item shows when it is opened, and its ranking as TREC files carry it.

An item shows its query and judged documents (from the case), the documents the model ranked
first with their scores and grades, the rank of the first relevant one, and, for a local BEIR
folder, the ranked documents' text.
"""

from __future__ import annotations

from typing import Any

from ragmatrix.families.text_retrieval import beir
from ragmatrix.families.text_retrieval.retrieval import TextItem
from ragmatrix.foundations.context import RunContext, current
from ragmatrix.results.rows import Iteration, Row
from ragmatrix.seam.case import CaseInputError
from ragmatrix.seam.detail import Fields, ItemView, Listing, Part, Text, number
from ragmatrix.seam.family import Rankings

DOCUMENT_CHARS = 2000


def asked(case: TextItem, row: Row) -> list[Part]:
    query = case.input
    judged_documents = sorted(case.expected.qrels.items(), key=lambda pair: (-pair[1], pair[0]))
    return [
        Fields("query", [("query", query.query), ("query id", query.query_id), ("dataset", query.dataset.label)]),
        Listing(
            "judged documents",
            ["document", "grade"],
            [[doc, str(grade)] for doc, grade in judged_documents],
            marked=[grade > 0 for _, grade in judged_documents],
            numeric={1},
        ),
    ]


def answered(iteration: Iteration, case: TextItem | None) -> list[Part]:
    documents: list[dict[str, Any]] = [d for d in iteration.details.get("top_documents", []) if isinstance(d, dict)]
    if not documents:
        return []
    first = next((rank for rank, d in enumerate(documents, 1) if (d.get("grade") or 0) > 0), None)
    summary = [
        ("first relevant document at rank", str(first) if first else f"none in the top {len(documents)}"),
        ("corpus size", number(iteration.details.get("corpus_size"))),
    ]
    parts: list[Part] = [
        Fields("ranking", summary),
        Listing(
            "ranked documents",
            ["rank", "document", "score", "grade"],
            [
                [str(rank), str(d.get("id")), number(d.get("score")), str(d.get("grade", 0))]
                for rank, d in enumerate(documents, 1)
            ],
            marked=[(d.get("grade") or 0) > 0 for d in documents],
            numeric={0, 2, 3},
        ),
    ]
    texts = _texts(case)
    for rank, document in enumerate(documents, 1):
        text = texts.get(str(document.get("id")))
        if text is not None:
            shown = text if len(text) <= DOCUMENT_CHARS else text[:DOCUMENT_CHARS] + " ..."
            parts.append(Text(f"document {rank}: {document.get('id')}", shown))
    return parts


def ranked(iteration: Iteration) -> list[tuple[str, float]]:
    """The documents an iteration ranked, best first."""
    documents = iteration.details.get("top_documents", [])
    return [(str(d["id"]), float(d["score"])) for d in documents if isinstance(d, dict) and "id" in d]


def judged(case: TextItem) -> dict[str, int]:
    """The case's qrels: each judged document's grade."""
    return dict(case.expected.qrels)


class _Texts:
    """Each local dataset's documents by id, once per run."""

    def __init__(self, run: RunContext) -> None:
        self.by_dataset: dict[str, dict[str, str]] = {}


def _texts(case: TextItem | None) -> dict[str, str]:
    """The documents of a case's dataset by id, for a local folder only: a Hugging Face dataset
    is not fetched to show an item."""
    if case is None or case.input.dataset.path is None:
        return {}
    key = f"{case.directory}|{case.input.dataset.label}"
    read = current().part(_Texts).by_dataset
    if key not in read:
        try:
            corpus = beir.corpus(case.input.dataset, case.directory)
            read[key] = dict(zip(corpus.ids, corpus.texts, strict=True))
        except CaseInputError:
            read[key] = {}
    return read[key]


VIEW = ItemView(asked=asked, answered=answered)
RANKINGS = Rankings(ranked=ranked, judged=judged)
