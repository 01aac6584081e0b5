"""Statistics shared by the families and the leaderboard. scipy does the maths."""

from __future__ import annotations

from collections.abc import Sequence


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a proportion."""
    from scipy.stats import binomtest

    interval = binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(interval.low), float(interval.high)


def bootstrap_interval(values: Sequence[float], confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (seeded, so reports are reproducible)."""
    import numpy as np
    from scipy.stats import bootstrap

    data = np.asarray(values, dtype=float)
    if len(data) < 2 or np.all(data == data[0]):
        return float(data.mean()), float(data.mean())
    result = bootstrap(
        (data,), np.mean, confidence_level=confidence, method="percentile", random_state=seed, n_resamples=2000
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean and 95% CI: Wilson when every value is 0 or 1, a bootstrap otherwise."""
    if not values:
        raise ValueError("no values")
    mean = sum(values) / len(values)
    if all(v in (0.0, 1.0) for v in values):
        low, high = wilson_interval(int(sum(values)), len(values), confidence)
    else:
        low, high = bootstrap_interval(values, confidence)
    return mean, low, high
