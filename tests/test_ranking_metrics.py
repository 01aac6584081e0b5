"""Ranking metrics against values computed by hand (log2(3) = 1.5849625, 1/log2(3) = 0.6309298)."""

from __future__ import annotations

import pytest

from ragmatrix.stats.metrics import dcg_at_k, hit_at_k, mrr_at_k, ndcg_at_k, precision_at_k, recall_at_k

RANKING = ["a", "b", "c", "d"]
BINARY = {"b": 1.0, "d": 1.0, "e": 1.0}  # e is relevant but never retrieved


def test_dcg_discounts_by_log2_of_rank_plus_one():
    # 3/log2(2) + 2/log2(3) + 1/log2(4) = 3 + 1.2618595 + 0.5
    assert dcg_at_k([3, 2, 1], 3) == pytest.approx(4.7618595)
    assert dcg_at_k([3, 2, 1], 1) == pytest.approx(3.0)


def test_binary_ndcg_counts_unretrieved_relevant_items_in_the_ideal():
    # DCG@3 = 1/log2(3) = 0.6309298; IDCG@3 = 1 + 0.6309298 + 0.5 = 2.1309298 (three relevant)
    assert ndcg_at_k(RANKING, BINARY, 3) == pytest.approx(0.6309298 / 2.1309298)
    assert ndcg_at_k(RANKING, BINARY, 3) == pytest.approx(0.2960819, abs=1e-6)
    # @10: DCG = 0.6309298 + 1/log2(5) = 0.6309298 + 0.4306766; the ideal places e, b, d first
    assert ndcg_at_k(RANKING, BINARY, 10) == pytest.approx(1.0616064 / 2.1309298)


def test_graded_ndcg_uses_the_gains():
    graded = {"x": 1.0, "y": 3.0, "z": 2.0}
    # DCG = 1 + 3 * 0.6309298 + 2 * 0.5 = 3.8927893; IDCG = 3 + 2 * 0.6309298 + 1 * 0.5 = 4.7618595
    assert ndcg_at_k(["x", "y", "z"], graded, 3) == pytest.approx(0.8174935, abs=1e-6)
    assert ndcg_at_k(["y", "z", "x"], graded, 3) == pytest.approx(1.0)


def test_ndcg_of_a_perfect_and_of_an_empty_ranking():
    assert ndcg_at_k(["b", "d", "e"], BINARY, 10) == pytest.approx(1.0)
    assert ndcg_at_k([], BINARY, 10) == 0.0
    assert ndcg_at_k(RANKING, {}, 10) == 0.0  # nothing relevant


def test_mrr_recall_precision_and_hits():
    assert mrr_at_k(RANKING, BINARY, 10) == pytest.approx(0.5)
    assert mrr_at_k(RANKING, BINARY, 1) == 0.0
    assert mrr_at_k(["z", "y", "x", "d"], BINARY, 10) == pytest.approx(0.25)
    assert recall_at_k(RANKING, BINARY, 3) == pytest.approx(1 / 3)
    assert recall_at_k(RANKING, BINARY, 10) == pytest.approx(2 / 3)
    assert recall_at_k(RANKING, {}, 10) == 0.0
    assert precision_at_k(RANKING, BINARY, 1) == 0.0
    assert precision_at_k(RANKING, BINARY, 2) == pytest.approx(0.5)
    assert precision_at_k(["b"], BINARY, 5) == pytest.approx(0.2)  # short rankings still divide by k
    assert hit_at_k(RANKING, BINARY, 1) == 0.0
    assert hit_at_k(RANKING, BINARY, 2) == 1.0


def test_an_item_with_zero_gain_is_not_relevant():
    relevance = {"a": 0.0, "b": 2.0}
    assert mrr_at_k(["a", "b"], relevance, 10) == pytest.approx(0.5)
    assert recall_at_k(["a"], relevance, 10) == 0.0
    assert ndcg_at_k(["a", "b"], relevance, 10) == pytest.approx(0.6309298)
