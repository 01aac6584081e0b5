"""zELO battles: a judge compares the case's documents in pairs, Bradley–Terry turns the
outcomes into one zELO per document, and their ranking is scored against graded labels. A
reranker scores the same documents directly, as zbench backtests one.

Cases: benchmark/data/zelo_battles_data.yaml. The family: ragmatrix/families/zelo_battles.py.
"""

from ragmatrix.families import zelo_battles


def test_zelo_battles(judge, case, record):
    """Any judge (an LLM, an ensemble, an embedder, BM25) battles the documents; the zELO
    ranking is scored by nDCG@k."""
    battles = zelo_battles.battle(judge, case)
    record(zelo_battles.score(case, battles))


def test_zelo_reranking(reranker, case, record):
    """A reranker scores every document for the query; its order is scored like the zELO
    ranking, with zbench's own figures beside it."""
    reranked = zelo_battles.rerank(reranker, case)
    record(zelo_battles.score_reranking(case, reranked))
