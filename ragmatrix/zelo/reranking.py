"""A reranker on a zELO case, as zbench backtests one: it scores the case's documents directly,
and their order is scored against the case's graded labels.

The row's score is the family's own nDCG@k (linear gain = the label), so a reranker stands in the
same table as the judges whose battles rank the same documents; pairwise accuracy, Kendall's
tau-b and recall@k go beside it, as for a battle. The details also hold what zbench's
`benchmark_ndcg`, `benchmark_accuracy` and `recall_at_k` give on the same scores and labels
(`zbench`): NDCG with gain exp(label) over every document and no cut-off, accuracy over every
pair with a tie on either side counted wrong, recall@k over the top k labels. zbench takes a
file's first ten documents; a case's documents have no file order, so all of them are kept.

A two-stage system (a reranker with a `first_stage`) reranks its first stage's best `top_n`; a
case holds fewer documents than any sensible depth, and then the first stage changes nothing and
is not asked. A document the reranker gave no valid relevance makes the outcome invalid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragmatrix.seam.outcome import Outcome
from ragmatrix.zelo.battles import ZeloItem, ranking, ranking_metrics
from ragmatrix.zelo.rerank_eval import exp_gains, zbench_accuracy, zbench_ndcg, zbench_recall

if TYPE_CHECKING:
    from ragmatrix.models.protocols import Reranker


@dataclass(frozen=True)
class Reranked:
    """A case's documents as a reranker scored them."""

    ids: list[str]  # the case's document ids, in its fixed (sorted) order
    relevance: list[float | None]  # per document; None: no valid relevance from the model
    reranked: int  # documents the reranker scored (fewer than all behind a shallow first stage)


def rerank(model: Reranker, case: ZeloItem) -> Reranked:
    """The case's documents scored by the reranker (through its first stage when that stage
    would leave some out)."""
    ids, texts, query = case.input.ids, case.input.texts, case.input.query
    if model.first_stage is not None and model.top_n < len(ids):
        from ragmatrix.models.two_stage import rerank_top

        reordered = rerank_top(model.first_stage.similarities(query, texts), texts, query, model)
        invalid = set(reordered.invalid)
        scores = [None if i in invalid else float(s) for i, s in enumerate(reordered.scores)]
        return Reranked(ids, scores, len(reordered.reranked))
    return Reranked(ids, model.rerank(query, texts), len(ids))


def score(case: ZeloItem, reranked: Reranked) -> Outcome:
    """nDCG@k of the reranker's order against the labels (the row's score), the battles' other
    metrics, and zbench's figures on the same scores."""
    expected = case.expected
    k = expected.k
    labels = {i: expected.relevance[i] for i in reranked.ids}
    details: dict[str, Any] = {"k": k, "reranked": reranked.reranked}
    missing = [i for i, s in zip(reranked.ids, reranked.relevance, strict=True) if s is None]
    if missing:
        reason = f"{len(missing)} of {len(reranked.ids)} documents got no valid relevance from the model"
        return Outcome.invalid(reason, **details, invalid_relevances=missing)
    scores = {i: float(s) for i, s in zip(reranked.ids, reranked.relevance, strict=True) if s is not None}
    found = ranking_metrics(scores, labels, k, expected.relevant_from, tolerance=0.0)
    given = [scores[i] for i in reranked.ids]
    gold = [float(labels[i]) for i in reranked.ids]
    gains = list(exp_gains({i: g for i, g in zip(reranked.ids, gold, strict=True)}).values())
    details.update(
        metrics=found,
        zbench={
            "ndcg": round(zbench_ndcg(gains, given), 6),
            "accuracy": round(zbench_accuracy(given, gold), 6),
            f"recall@{k}": round(zbench_recall(given, gold, k, k), 6),
        },
        relevance={i: round(scores[i], 6) for i in reranked.ids},
        ranking=ranking(scores, labels),
    )
    return Outcome(found[f"ndcg@{k}"], **details)
