"""zELO battles: a judge compares the case's documents in pairs, Bradley–Terry turns the
outcomes into one zELO per document, and their ranking is scored against graded labels.

Cases: benchmark/data/zelo_battles_data.yaml. Logic: plugin/families/zelo.py.
"""

from plugin.families import zelo

SCORING_VERSION = zelo.SCORING_VERSION


def test_zelo_battles(judge, case, record):
    """Any judge (an LLM, an ensemble, an embedder, BM25) battles the documents; the zELO
    ranking is scored by nDCG@k."""
    battles = zelo.battle(judge, case)
    record(zelo.score(case, battles))
