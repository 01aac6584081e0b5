"""Text retrieval on BEIR-format datasets: one case per judged query, nDCG@10 over the corpus.

A case of the data file names a dataset (see `beir`); each query with judgements becomes the
case `<case>.<query id>`. The corpus is embedded once per model (through the embedding cache)
and ranked by cosine similarity; BM25 is the baseline. Scores use the same metric functions
as code retrieval, with graded relevance: `ndcg_at_10` (the item's score, linear gains as in
trec_eval, pytrec_eval and ranx), `mrr_at_10`, `recall_at_10` and `precision_at_1`, where a
document is relevant when its grade is above 0. As in BEIR's evaluation, a document whose id
is the query's own id is never ranked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, Field

from ragmatrix.families.text_retrieval import beir
from ragmatrix.families.text_retrieval.beir import DatasetSpec
from ragmatrix.foundations.context import RunContext, current
from ragmatrix.foundations.data_model import DataModel
from ragmatrix.models.progress import note
from ragmatrix.seam.case import Case, CaseInputError
from ragmatrix.seam.outcome import Outcome
from ragmatrix.stats.metrics import ranking_metrics

if TYPE_CHECKING:
    import numpy as np

    from ragmatrix.models.protocols import DocumentIndex, Model, Reranker, Retriever
    from ragmatrix.models.two_stage import Reordered

# Bump when scoring or document text changes: stored results are then recomputed.
SCORING_VERSION = 1
TOP_K = 10


class TextQuery(DataModel):
    model_config = ConfigDict(extra="forbid")

    dataset: DatasetSpec
    query_id: str
    query: str = Field(min_length=1)


class TextExpected(DataModel):
    model_config = ConfigDict(extra="forbid")

    qrels: dict[str, int] = Field(min_length=1)  # document id -> grade (> 0: relevant)


class TextRetrievalCase(DataModel):
    model_config = ConfigDict(extra="forbid")
    input: TextQuery
    expected: TextExpected


# A case of this family, as its test receives it.
TextItem = Case[TextQuery, TextExpected]


def _name(query_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-]+", "_", query_id).strip("_") or "query"


def expand_dataset(raw: dict[str, Any], directory: Path) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The raw cases of a case that names a dataset: one per judged query."""
    raw_input = raw.get("input")
    name = str(raw["case"])
    if not isinstance(raw_input, dict) or "dataset" not in raw_input or "query_id" in raw_input:
        return [raw], []
    if set(raw_input) != {"dataset"} or "expected" in raw:
        return [], [(name, "a case with a dataset takes its queries and judgements from it: give only input.dataset")]
    try:
        spec = DatasetSpec.model_validate(raw_input["dataset"])
        found = beir.judged(spec, directory)
    except CaseInputError as error:
        return [], [(name, str(error))]
    except ValueError as error:
        return [], [(name, f"input.dataset: {str(error).splitlines()[-1].strip()}")]
    if not found.queries:
        return [], [(name, f"dataset {spec.label} has no query with a relevant document in split {spec.split}")]
    metadata: dict[str, Any] = {k: raw[k] for k in ("tags", "domain", "description") if k in raw}
    cases: list[dict[str, Any]] = []
    seen: set[str] = set()
    for query_id, text in found.queries.items():
        case_name = f"{name}.{_name(query_id)}"
        while case_name in seen:
            case_name += "_"
        seen.add(case_name)
        cases.append(
            {
                "case": case_name,
                "input": {"dataset": raw_input["dataset"], "query_id": query_id, "query": text},
                "expected": {"qrels": found.qrels[query_id]},
                **metadata,
            }
        )
    return cases, []


def dataset_fingerprint(case: TextItem) -> str:
    """The md5 of the dataset's files (or of its Hugging Face fingerprints): part of the key."""
    try:
        return beir.judged(case.input.dataset, case.directory).fingerprint
    except CaseInputError as error:
        raise CaseInputError(f"case '{case.name}': {error}") from None


@dataclass(frozen=True)
class Index:
    ids: list[str]
    scorer: DocumentIndex
    model: Retriever | None = None  # kept alive with its index, so that its id stays its own
    texts: list[str] | None = None  # the documents, for a reranker to read


MEMO_SIZE = 8


class Indexes:
    """A run's indexes, by (model, dataset fingerprint); at most `MEMO_SIZE`."""

    def __init__(self, run: RunContext) -> None:
        self.built: dict[tuple[int, str], Index] = {}


def index_of(model: Retriever, case: TextItem) -> Index:
    """The corpus indexed by the model, once per run and dataset."""
    built = current().part(Indexes).built
    key = (id(model), dataset_fingerprint(case))
    if key not in built:
        try:
            documents = beir.corpus(case.input.dataset, case.directory)
        except CaseInputError as error:
            raise CaseInputError(f"case '{case.name}': {error}") from None
        if len(built) >= MEMO_SIZE:
            built.clear()
        label = case.input.dataset.label
        note(f"{model.id}: indexing {len(documents.texts)} documents of {label}")
        built[key] = Index(documents.ids, model.index_documents(documents.texts), model, documents.texts)
    return built[key]


@dataclass(frozen=True)
class Ranking:
    documents: list[tuple[str, float]]  # the top documents, best first (ties in corpus order)
    corpus_size: int
    reranking: Reordered | None = None  # a two-stage system's second stage
    ids: list[str] | None = None  # the corpus's ids, in its order (read with `reranking`)


def first_texts(case: TextItem, model: Model) -> tuple[list[str], list[str]]:
    """What an embedder's item embeds: the query (the corpus is indexed apart, once per model)."""
    return [case.input.query], []


def search(model: Retriever | Reranker, case: TextItem) -> Ranking:
    """The corpus ranked for the query. A two-stage system's first stage ranks it all, its
    reranker reorders the best `top_n` (the query's own document never among them)."""
    from ragmatrix.models.two_stage import rerank_top, stages

    first, reranker = stages(model)
    index = index_of(first, case)
    queries, _ = first_texts(case, model)
    scores = index.scorer.score(queries)[0]
    if reranker is None:
        return rank(index.ids, scores, case.input.query_id)
    import numpy as np

    searchable = np.asarray([doc != case.input.query_id for doc in index.ids], dtype=bool)
    reordered = rerank_top(scores, index.texts or [], queries[0], reranker, searchable)
    return rank(index.ids, reordered.scores, case.input.query_id, reranking=reordered)


def rank(
    ids: list[str],
    scores: np.ndarray | list[float],
    query_id: str | None = None,
    k: int = TOP_K,
    reranking: Reordered | None = None,
) -> Ranking:
    """The top k documents by score; the query's own id is left out, as BEIR leaves it out."""
    import numpy as np

    values = np.asarray(scores, dtype=np.float64).copy()
    if query_id is not None:
        values[[i for i, doc in enumerate(ids) if doc == query_id]] = -np.inf
    order = np.argsort(-values, kind="stable")
    top = [int(i) for i in order[: k + 1] if np.isfinite(values[i])][:k]
    return Ranking([(ids[i], float(values[i])) for i in top], len(ids), reranking, ids if reranking else None)


def metrics(case: TextItem, ranking: Ranking, k: int = TOP_K) -> dict[str, float]:
    qrels = {doc: float(grade) for doc, grade in case.expected.qrels.items()}
    ranked = [doc for doc, _ in ranking.documents]
    values = ranking_metrics(ranked, qrels, k)
    return {name: round(value, 6) for name, value in values.items()}


def score(case: TextItem, ranking: Ranking) -> Outcome:
    """nDCG@10 is the score; the metrics and the top documents with their grades are details.
    A two-stage system's ranking with a document its reranker gave no valid relevance is
    invalid."""
    reranking = ranking.reranking
    if reranking is not None and reranking.invalid:
        shown = f"{len(reranking.invalid)} of {len(reranking.reranked)}"
        reason = f"{shown} documents got no valid relevance from the reranker"
        return Outcome.invalid(reason, reranking=reranking.details())
    values = metrics(case, ranking)
    ids = ranking.ids or []
    first_ranks = {ids[i]: place for i, place in reranking.first_ranks.items()} if reranking else {}
    top = []
    for doc, value in ranking.documents:
        entry: dict[str, Any] = {"id": doc, "score": round(value, 4), "grade": case.expected.qrels.get(doc, 0)}
        if doc in first_ranks:
            entry["first_stage_rank"] = first_ranks[doc]
        top.append(entry)
    details: dict[str, Any] = {
        "metrics": values,
        "query_id": case.input.query_id,
        "dataset": case.input.dataset.label,
        "top_documents": top,
        "corpus_size": ranking.corpus_size,
    }
    if reranking is not None:
        details["reranking"] = reranking.details()
    tags = case.metadata.get("tags")
    if tags:
        details["tags"] = list(tags) if isinstance(tags, list | tuple) else [str(tags)]
    return Outcome(score=values[f"ndcg_at_{TOP_K}"], **details)
