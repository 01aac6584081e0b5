"""Paired significance tests between two models, and Holm's correction for many of them.

Both models are scored on the same items, so the tests are paired:

- yes/no outcomes (every paired value 0 or 1): McNemar's exact test, a two-sided binomial
  test (scipy) on the discordant pairs, the items one model got right and the other wrong;
- continuous scores: a two-sided paired permutation test (scipy) of the mean difference,
  flipping the sign of each item's difference; exact when there are at most 13 pairs, else
  9,999 seeded resamples.

Holm's step-down correction keeps the chance of any false "significant" within a family of
comparisons at or below alpha.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragmatrix.stats import settled

ALPHA = 0.05
MCNEMAR = "McNemar (exact)"
PERMUTATION = "paired permutation"


@dataclass(frozen=True)
class PairedTest:
    test: str  # MCNEMAR or PERMUTATION
    n: int  # pairs
    difference: float  # mean of a - b
    p: float
    discordant: tuple[int, int] | None = None  # McNemar: (a right and b wrong, a wrong and b right)


def is_binary(values: Sequence[float]) -> bool:
    return all(v in (0.0, 1.0) for v in values)


def mcnemar_exact(a: Sequence[float], b: Sequence[float]) -> PairedTest:
    """McNemar's exact test on paired yes/no outcomes (1 = right)."""
    _check_pairs(a, b)
    only_a = sum(1 for x, y in zip(a, b, strict=True) if x == 1 and y == 0)
    only_b = sum(1 for x, y in zip(a, b, strict=True) if x == 0 and y == 1)
    p = 1.0
    if only_a + only_b:
        settled()
        from scipy.stats import binomtest

        p = float(binomtest(only_a, only_a + only_b, 0.5).pvalue)
    return PairedTest(MCNEMAR, len(a), (only_a - only_b) / len(a), min(p, 1.0), (only_a, only_b))


def paired_permutation(a: Sequence[float], b: Sequence[float], resamples: int = 9999, seed: int = 0) -> PairedTest:
    """Two-sided paired permutation test of the mean difference a - b."""
    _check_pairs(a, b)
    differences = [x - y for x, y in zip(a, b, strict=True)]
    difference = sum(differences) / len(differences)
    if all(d == 0 for d in differences):
        return PairedTest(PERMUTATION, len(a), 0.0, 1.0)
    import numpy as np

    settled()
    from scipy.stats import permutation_test

    def mean_difference(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
        return np.mean(x - y, axis=axis)

    result = permutation_test(
        (np.asarray(a, dtype=float), np.asarray(b, dtype=float)),
        mean_difference,
        permutation_type="samples",
        vectorized=True,
        n_resamples=resamples,
        alternative="two-sided",
        rng=np.random.default_rng(seed),
    )
    return PairedTest(PERMUTATION, len(a), difference, min(float(result.pvalue), 1.0))


def paired_test(a: Sequence[float], b: Sequence[float]) -> PairedTest:
    """McNemar when every value is 0 or 1, the permutation test otherwise."""
    if is_binary(a) and is_binary(b):
        return mcnemar_exact(a, b)
    return paired_permutation(a, b)


def smallest_p(pairs: int) -> float:
    """A floor under the p-value `paired_test` can give on `pairs` pairs, whatever the scores:
    with every pair differing the same way, McNemar's exact test and the exact permutation test
    both give 2 / 2**pairs (the resampled permutation test never goes lower)."""
    return min(1.0, 2.0 ** (1 - pairs))


def fewest_pairs(tests: int, alpha: float = ALPHA) -> int:
    """The fewest pairs on which a difference can be significant after Holm's correction over
    `tests` tests (the smallest p is multiplied by their number)."""
    pairs = 1
    while max(tests, 1) * smallest_p(pairs) >= alpha:
        pairs += 1
    return pairs


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given: the i-th smallest p is multiplied by
    (m - i + 1), and the adjusted values are made non-decreasing in that order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[index]))
        adjusted[index] = running
    return adjusted


def _check_pairs(a: Sequence[float], b: Sequence[float]) -> None:
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length ({len(a)} and {len(b)})")
    if not a:
        raise ValueError("no pairs")
