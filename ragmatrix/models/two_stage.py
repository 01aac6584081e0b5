"""A two-stage retrieval system: a first stage ranks every document, a reranker reorders its best
`top_n` (a reranker entry of models.yaml that names `first_stage`).

`stages(model)` says what a retrieval family's model is made of; `rerank_top` turns the first
stage's scores for one query into the system's. The system's ranking is the reranked documents
first, in the reranker's order, then every other document in the first stage's order. Its scores
say the same to anything that sorts them: a reranked document carries the reranker's relevance,
and the others the first stage's score moved below the lowest reranked one (their order kept).
A document the reranker gave no valid relevance comes right after the valid ones and is listed in
`invalid`: a family counts such a ranking invalid, never a ranking the model did not give.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from ragmatrix.models.protocols import Reranker, Retriever


@dataclass(frozen=True)
class Reordered:
    """One query's ranking by a two-stage system."""

    scores: np.ndarray  # per document, float64: sorting them gives the system's ranking
    reranked: list[int]  # the documents the reranker scored (the first stage's best), best first
    invalid: list[int]  # of those, the documents the reranker gave no valid relevance
    first_ranks: dict[int, int]  # a reranked document's place in the first stage's ranking (1: first)
    first_stage: str  # the id of the model that retrieved
    top_n: int

    def details(self) -> dict[str, Any]:
        """What a row records of the reranking besides the family's own details."""
        return {
            "first_stage": self.first_stage,
            "top_n": self.top_n,
            "reranked": len(self.reranked),
            "invalid_relevances": len(self.invalid),
        }


def stages(model: Retriever | Reranker) -> tuple[Retriever, Reranker | None]:
    """The model that retrieves, and the reranker that reorders its best documents (None for a
    plain retriever)."""
    from ragmatrix.models.protocols import Reranker

    if isinstance(model, Reranker):
        if model.first_stage is None:
            raise TypeError(f"reranker '{model.id}' has no first_stage: it cannot retrieve on its own")
        return model.first_stage, model
    return model, None


def rerank_top(
    first_scores: np.ndarray | list[float],
    documents: list[str],
    query: str,
    reranker: Reranker,
    searchable: np.ndarray | None = None,
) -> Reordered:
    """The system's scores for one query: the first stage's best `top_n` documents (of the
    `searchable` ones, a boolean mask; all by default) scored by the reranker, the rest after
    them in the first stage's order. Ties keep the first stage's order when it picks the top."""
    import numpy as np

    first = np.asarray(first_scores, dtype=np.float64)
    candidates = np.arange(len(first)) if searchable is None else np.flatnonzero(searchable)
    top = [int(i) for i in candidates[np.argsort(-first[candidates], kind="stable")][: reranker.top_n]]
    relevances = reranker.rerank(query, [documents[i] for i in top]) if top else []
    valid = {i: float(r) for i, r in zip(top, relevances, strict=True) if r is not None}
    invalid = [i for i, r in zip(top, relevances, strict=True) if r is None]
    floor = min(valid.values(), default=0.0)
    scores = np.empty(len(first), dtype=np.float64)
    rest = np.ones(len(first), dtype=bool)
    rest[top] = False
    if rest.any():  # below every reranked document, in the first stage's order
        scores[rest] = first[rest] - first[rest].max() + floor - 2.0
    for i, value in valid.items():
        scores[i] = value
    scores[invalid] = floor - 1.0
    best_first = sorted(top, key=lambda i: -scores[i])  # stable: ties in the first stage's order
    first_stage = reranker.first_stage.id if reranker.first_stage is not None else ""
    ranks = {i: place + 1 for place, i in enumerate(top)}
    return Reordered(scores, best_first, invalid, ranks, first_stage, reranker.top_n)
