"""Bradley–Terry strengths from pairwise outcomes: the zELO.

The model says P(i beats j) = sigmoid(z_i - z_j). Each observation is a pair (a, b) and the
share `p` of the win that went to b (1 = b won outright, 0.5 = a tie, 0 = a won), so it adds
weight p to "b beats a" and 1 - p to "a beats b". The fit maximises

    sum_obs  p * log sigmoid(z_b - z_a) + (1 - p) * log sigmoid(z_a - z_b)  -  ridge * sum_i z_i^2

with scipy: a trust-region Newton method given the analytic gradient and Hessian. The small
ridge prior keeps every strength finite when the data are unanimous (the plain maximum-
likelihood estimate then diverges) and fixes the scale's origin; the result is centred to
mean 0 all the same.

Strengths are in natural-log units (zbench's zELO). `elo()` gives Chatbot Arena's display,
1000 + 400 * z / ln 10, and `from_elo()` undoes it. numpy and scipy are imported only when a
fit runs.

Strengths compare only within a connected component of the comparison graph (items linked by
observations): the likelihood says nothing about how one component stands against another, so
the ridge prior alone puts each component's mean near 0. `components()` counts them.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ragmatrix.stats import settled

if TYPE_CHECKING:
    import numpy as np

# lambda in `ridge * sum z^2`: small enough to leave well-supported strengths alone, large
# enough to keep a document that won every battle finite.
RIDGE = 0.01
BOOTSTRAP_SAMPLES = 200
# A fit is converged when no component of the objective's gradient exceeds this. scipy's own
# `success` is not enough: asked for a gradient of 1e-10, trust-exact can stop at 1e-12 with
# "a bad approximation caused failure to predict improvement", which is a converged fit.
CONVERGED_GRADIENT = 1e-6

Observation = tuple[int, int, float]  # (a, b, share of the win that went to b)


class FitError(RuntimeError):
    """The optimiser stopped without meeting its convergence test."""


def elo(z: float) -> float:
    """The Elo display of a natural-log strength."""
    return 1000.0 + 400.0 * z / math.log(10.0)


def from_elo(rating: float) -> float:
    """The natural-log strength of an Elo display: the inverse of `elo`."""
    return (rating - 1000.0) * math.log(10.0) / 400.0


def components(n: int, observations: Sequence[Observation]) -> int:
    """The number of connected components of the comparison graph of `n` items: an item never
    compared is a component of its own."""
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    count = n
    for a, b, _ in observations:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[ra] = rb
            count -= 1
    return count


def negative_log_posterior(
    z: np.ndarray, a: np.ndarray, b: np.ndarray, p: np.ndarray, weight: np.ndarray, ridge: float
) -> tuple[float, np.ndarray]:
    """The objective and its gradient, for arrays of observations."""
    import numpy as np

    d = z[b] - z[a]
    # log sigmoid(x) = -logaddexp(0, -x), stable for large |x|
    loss = float(np.sum(weight * (p * np.logaddexp(0.0, -d) + (1.0 - p) * np.logaddexp(0.0, d))))
    loss += ridge * float(z @ z)
    # d loss / d d = weight * (sigmoid(d) - p)
    g = weight * (_sigmoid(d) - p)
    n = len(z)
    gradient = np.bincount(b, g, n) - np.bincount(a, g, n) + 2.0 * ridge * z
    return loss, gradient


def hessian(z: np.ndarray, a: np.ndarray, b: np.ndarray, p: np.ndarray, weight: np.ndarray, ridge: float) -> np.ndarray:
    """The objective's Hessian: each observation adds w s (1 - s) (e_b - e_a)(e_b - e_a)^T."""
    import numpy as np

    n = len(z)
    s = _sigmoid(z[b] - z[a])
    c = weight * s * (1.0 - s)
    matrix = np.zeros((n, n))
    np.add.at(matrix, (a, b), -c)
    np.add.at(matrix, (b, a), -c)
    matrix[np.diag_indices(n)] = np.bincount(a, c, n) + np.bincount(b, c, n) + 2.0 * ridge
    return matrix


def _sigmoid(x: np.ndarray) -> np.ndarray:
    import numpy as np

    return np.exp(-np.logaddexp(0.0, -x))


def fit(
    n: int,
    observations: Sequence[Observation],
    ridge: float = RIDGE,
    weights: Sequence[float] | None = None,
    start: Sequence[float] | None = None,
    max_iterations: int = 1000,
) -> list[float]:
    """The strengths of `n` items, centred to mean 0. Items never compared stay at 0.

    Raises FitError when the optimiser stops short of its convergence test: a strength that
    has not converged is never returned as if it had."""
    import numpy as np

    settled()
    from scipy.optimize import minimize

    if n == 0:
        return []
    if ridge <= 0:
        raise ValueError("the ridge prior must be positive: unanimous data would diverge")
    if not observations:
        return [0.0] * n
    a = np.fromiter((o[0] for o in observations), dtype=np.intp, count=len(observations))
    b = np.fromiter((o[1] for o in observations), dtype=np.intp, count=len(observations))
    p = np.fromiter((o[2] for o in observations), dtype=float, count=len(observations))
    if np.any((p < 0) | (p > 1)) or not np.all(np.isfinite(p)):
        raise ValueError("each observation's share of the win must lie in [0, 1]")
    if np.any((a < 0) | (a >= n) | (b < 0) | (b >= n)):
        raise ValueError("an observation names an item outside 0..n-1")
    weight = np.ones(len(observations)) if weights is None else np.asarray(weights, dtype=float)
    z0 = np.zeros(n) if start is None else np.asarray(start, dtype=float)
    # The objective is smooth and strictly convex (the ridge), so a trust-region Newton method
    # with the analytic gradient and Hessian converges in a few steps.
    result = minimize(
        negative_log_posterior,
        z0,
        args=(a, b, p, weight, ridge),
        jac=True,
        hess=hessian,
        method="trust-exact",
        options={"gtol": 1e-10, "maxiter": max_iterations},
    )
    if not result.success:
        _, gradient = negative_log_posterior(result.x, a, b, p, weight, ridge)
        largest = float(np.max(np.abs(gradient)))
        if largest > CONVERGED_GRADIENT:
            raise FitError(
                f"Bradley-Terry fit did not converge after {result.nit} iterations "
                f"(gradient {largest:.1e}: {result.message})"
            )
    z = np.asarray(result.x, dtype=float)
    z -= z.mean()
    return [float(v) for v in z]


def bootstrap(
    n: int,
    groups: Sequence[Sequence[Observation]],
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = 0,
    ridge: float = RIDGE,
) -> list[list[float]]:
    """Strengths refitted on `samples` resamples of the groups (one group per pair, holding
    every judgement of that pair), drawn with replacement and seeded.

    The resamples are fitted together: Newton steps on all of them at once (numpy, batched),
    from the full fit, which is close to every resample's optimum. The objective is the one
    `fit` minimises; a resample that has not converged after a bounded number of steps is
    fitted by `fit` itself.
    """
    import numpy as np

    if not groups or samples < 1:
        return []
    rng = random.Random(seed)
    full = fit(n, [o for group in groups for o in group], ridge)
    drawn = [[groups[rng.randrange(len(groups))] for _ in groups] for _ in range(samples)]
    flat = [(s, o) for s, resample in enumerate(drawn) for group in resample for o in group]
    sample = np.fromiter((s for s, _ in flat), dtype=np.intp, count=len(flat))
    a = np.fromiter((o[0] for _, o in flat), dtype=np.intp, count=len(flat))
    b = np.fromiter((o[1] for _, o in flat), dtype=np.intp, count=len(flat))
    p = np.fromiter((o[2] for _, o in flat), dtype=float, count=len(flat))
    z = np.tile(np.asarray(full, dtype=float), (samples, 1))
    converged = _newton_together(z, sample, a, b, p, ridge)
    z -= z.mean(axis=1, keepdims=True)
    fits = [[float(v) for v in row] for row in z]
    for s in np.flatnonzero(~converged):
        fits[s] = fit(n, [o for group in drawn[s] for o in group], ridge, start=full)
    return fits


def _newton_together(
    z: np.ndarray,
    sample: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    p: np.ndarray,
    ridge: float,
    steps: int = 50,
    tolerance: float = 1e-10,
) -> np.ndarray:
    """Newton's method on several independent problems at once, in place; which converged."""
    import numpy as np

    count, n = z.shape
    ia, ib = sample * n + a, sample * n + b
    ab, ba = sample * n * n + a * n + b, sample * n * n + b * n + a
    diagonal = np.arange(n) * (n + 1)
    done = np.zeros(count, dtype=bool)
    for _ in range(steps):
        flat = z.reshape(-1)
        s = _sigmoid(flat[ib] - flat[ia])
        g = s - p
        pulls = np.bincount(ib, g, count * n) - np.bincount(ia, g, count * n)
        gradient = pulls.reshape(count, n) + 2.0 * ridge * z
        done = np.max(np.abs(gradient), axis=1) < tolerance
        if done.all():
            break
        c = s * (1.0 - s)
        hessian = -(np.bincount(ab, c, count * n * n) + np.bincount(ba, c, count * n * n)).reshape(count, n * n)
        totals = np.bincount(ia, c, count * n) + np.bincount(ib, c, count * n)
        hessian[:, diagonal] = totals.reshape(count, n) + 2.0 * ridge
        step = np.linalg.solve(hessian.reshape(count, n, n), gradient[..., None])[..., 0]
        z -= np.where(done[:, None], 0.0, step)
    return done


def percentile_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The central `confidence` interval of bootstrap values (percentile method)."""
    import numpy as np

    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(np.asarray(values, dtype=float), [tail, 100.0 - tail])
    return float(low), float(high)
