"""Statistics and ranking metrics shared by the families and the leaderboard. scipy does the
statistics."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from ragmatrix.stats import settled


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a proportion."""
    settled()
    from scipy.stats import binomtest

    interval = binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(interval.low), float(interval.high)


def bootstrap_interval(values: Sequence[float], confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (seeded, so reports are reproducible)."""
    import numpy as np

    settled()
    from scipy.stats import bootstrap

    data = np.asarray(values, dtype=float)
    if len(data) < 2 or np.all(data == data[0]):
        return float(data.mean()), float(data.mean())
    result = bootstrap(
        (data,), np.mean, confidence_level=confidence, method="percentile", random_state=seed, n_resamples=2000
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def cluster_bootstrap_interval(
    groups: Sequence[Sequence[float]], confidence: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of all values and a percentile bootstrap interval that resamples whole groups.

    Values of one group (a case's prompt variants, a query under several chunkings) are not
    independent; resampling them one by one would give too narrow an interval. The statistic
    is the pooled mean of the resampled groups, so it equals the plain mean on the data.
    """
    import numpy as np

    settled()
    from scipy.stats import bootstrap

    sums = np.asarray([sum(g) for g in groups], dtype=float)
    counts = np.asarray([len(g) for g in groups], dtype=float)
    mean = float(sums.sum() / counts.sum())
    if len(groups) < 2 or np.allclose(sums / counts, mean):
        return mean, mean, mean

    def pooled_mean(indices: np.ndarray, axis: int = -1) -> np.ndarray:
        chosen = indices.astype(int)
        return sums[chosen].sum(axis=axis) / counts[chosen].sum(axis=axis)

    result = bootstrap(
        (np.arange(len(groups)),),
        pooled_mean,
        vectorized=True,
        confidence_level=confidence,
        method="percentile",
        random_state=seed,
        n_resamples=2000,
    )
    return mean, float(result.confidence_interval.low), float(result.confidence_interval.high)


# --- ranking metrics ------------------------------------------------------------------------
# One query at a time: `ranking` lists item ids best first (distinct), `relevance` maps an id to
# its gain (1 for binary relevance, a grade such as 0..3 for graded relevance; 0 or absent means
# not relevant). The mean over queries gives nDCG@k, MRR@k and so on. Names follow MTEB and ranx.

K = TypeVar("K", bound=Hashable)


def dcg_at_k(gains: Sequence[float], k: int) -> float:
    """Discounted cumulative gain of the first k gains, in ranked order:
    sum of gain_i / log2(i + 1) over ranks i = 1..k (linear gains, as in trec_eval and ranx)."""
    return sum(float(gain) / math.log2(rank + 1) for rank, gain in enumerate(gains[:k], start=1))


def ndcg_at_k(ranking: Sequence[K], relevance: Mapping[K, float], k: int) -> float:
    """DCG@k of the ranking over the DCG@k of the ideal ranking of every relevant item (the
    min(R, k) highest gains), so unretrieved relevant items count against it. 0 when nothing is
    relevant."""
    ideal = dcg_at_k(sorted((float(g) for g in relevance.values() if g > 0), reverse=True), k)
    if ideal == 0:
        return 0.0
    return dcg_at_k([float(relevance.get(item, 0.0)) for item in ranking[:k]], k) / ideal


def mrr_at_k(ranking: Sequence[K], relevance: Mapping[K, float], k: int) -> float:
    """Reciprocal rank of the first relevant item within the top k, 0 when there is none."""
    for rank, item in enumerate(ranking[:k], start=1):
        if relevance.get(item, 0) > 0:
            return 1.0 / rank
    return 0.0


def recall_at_k(ranking: Sequence[K], relevance: Mapping[K, float], k: int) -> float:
    """The share of the relevant items that are in the top k (0 when nothing is relevant)."""
    relevant = {item for item, gain in relevance.items() if gain > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranking[:k])) / len(relevant)


def precision_at_k(ranking: Sequence[K], relevance: Mapping[K, float], k: int) -> float:
    """The share of the top k that is relevant; fewer than k ranked items still divide by k."""
    return sum(1 for item in ranking[:k] if relevance.get(item, 0) > 0) / k


def hit_at_k(ranking: Sequence[K], relevance: Mapping[K, float], k: int) -> float:
    """1 when any relevant item is in the top k, else 0."""
    return float(any(relevance.get(item, 0) > 0 for item in ranking[:k]))


# --- agreement between two scorings, and between raters ---------------------------------------


def pairwise_accuracy(system: Mapping[K, float], truth: Mapping[K, float]) -> float | None:
    """The share of item pairs that the system orders as the truth does. Pairs tied in the
    truth are left out; a pair the system ties (and the truth does not) counts one half, what a
    coin would get. None when the truth ties every pair."""
    items = [item for item in truth if item in system]
    right = 0.0
    pairs = 0
    for index, first in enumerate(items):
        for second in items[index + 1 :]:
            expected = truth[first] - truth[second]
            if expected == 0:
                continue
            pairs += 1
            given = system[first] - system[second]
            right += 0.5 if given == 0 else float((given > 0) == (expected > 0))
    return right / pairs if pairs else None


def kendall_tau_b(system: Sequence[float], truth: Sequence[float]) -> float | None:
    """Kendall's tau-b (scipy), which corrects for ties on both sides; None where it is
    undefined (one side constant)."""
    settled()
    from scipy.stats import kendalltau

    tau = float(kendalltau(system, truth, variant="b").statistic)
    return None if math.isnan(tau) else tau


def fleiss_kappa(counts: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa for subjects (rows) rated by the same number of raters into categories
    (columns hold how many raters chose each). None when it is undefined: fewer than two
    raters or subjects, or every rating in one category."""
    rows = [list(map(int, row)) for row in counts]
    if len(rows) < 2:
        return None
    raters = sum(rows[0])
    if raters < 2 or any(sum(row) != raters for row in rows):
        if raters >= 2:
            raise ValueError("every subject needs the same number of ratings")
        return None
    subjects = len(rows)
    observed = sum((sum(c * c for c in row) - raters) / (raters * (raters - 1)) for row in rows) / subjects
    shares = [sum(row[j] for row in rows) / (subjects * raters) for j in range(len(rows[0]))]
    chance = sum(share * share for share in shares)
    if chance >= 1.0:
        return None
    return (observed - chance) / (1.0 - chance)


def ranking_metrics(ranking: Sequence[K], relevance: Mapping[K, float], k: int) -> dict[str, float]:
    """The four metrics every retrieval family reports for one query, named as MTEB does:
    nDCG@k, MRR@k, Recall@k and P@1."""
    return {
        f"ndcg_at_{k}": ndcg_at_k(ranking, relevance, k),
        f"mrr_at_{k}": mrr_at_k(ranking, relevance, k),
        f"recall_at_{k}": recall_at_k(ranking, relevance, k),
        "precision_at_1": precision_at_k(ranking, relevance, 1),
    }
