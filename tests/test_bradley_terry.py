"""Bradley–Terry: the fit against an independent brute-force minimisation, finiteness on
unanimous data, recovery of known strengths, and the bootstrap."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.stats import spearmanr

from ragmatrix.stats import bradley_terry
from ragmatrix.zelo import battles as zelo
from ragmatrix.zelo.judges import combine_scores


def brute_force(n: int, observations, ridge: float) -> np.ndarray:
    """The same posterior written independently, from the win-weight matrix w[i][j] (weight of
    "i beats j"), minimised by BFGS with finite-difference gradients only."""
    wins = [[0.0] * n for _ in range(n)]
    for a, b, p in observations:
        wins[b][a] += p
        wins[a][b] += 1.0 - p

    def objective(z):
        total = 0.0
        for i in range(n):
            for j in range(n):
                if wins[i][j]:
                    total -= wins[i][j] * math.log(1.0 / (1.0 + math.exp(-(z[i] - z[j]))))
        return total + ridge * sum(v * v for v in z)

    result = minimize(objective, np.zeros(n), method="BFGS", jac="3-point", options={"gtol": 1e-12})
    return result.x - result.x.mean()


def random_observations(seed: int, n: int, count: int):
    rng = random.Random(seed)
    observations = []
    while len(observations) < count:
        a, b = rng.randrange(n), rng.randrange(n)
        if a != b:
            observations.append((a, b, rng.choice([0.0, 1.0, 0.5, rng.random()])))
    return observations


@pytest.mark.parametrize("seed", range(4))
def test_the_fit_agrees_with_a_brute_force_minimisation_to_1e_6(seed):
    observations = random_observations(seed, n=7, count=25)
    ours = np.array(bradley_terry.fit(7, observations))
    reference = brute_force(7, observations, bradley_terry.RIDGE)
    assert np.max(np.abs(ours - reference)) < 1e-6
    assert abs(ours.mean()) < 1e-12


def test_unanimous_results_stay_finite_and_ordered():
    # 0 < 1 < 2 < 3 < 4, every battle won outright, many times: the plain MLE diverges
    observations = [(i, i + 1, 1.0) for i in range(4)] * 10 + [(0, 4, 1.0)] * 10
    z = bradley_terry.fit(5, observations)
    assert all(math.isfinite(v) for v in z)
    assert z == sorted(z) and z[0] < -1 and z[-1] > 1
    assert abs(sum(z)) < 1e-9
    np.testing.assert_allclose(z, brute_force(5, observations, bradley_terry.RIDGE), atol=1e-6)


def test_ties_and_uncompared_items_stay_at_the_mean():
    assert bradley_terry.fit(3, [(0, 1, 0.5)] * 4) == pytest.approx([0.0, 0.0, 0.0], abs=1e-12)
    z = bradley_terry.fit(3, [(0, 1, 1.0)] * 4)
    assert z[1] > 0 > z[0] and z[2] == pytest.approx(-(z[0] + z[1]))


def test_bad_observations_are_refused():
    with pytest.raises(ValueError, match="share of the win"):
        bradley_terry.fit(2, [(0, 1, 1.5)])
    with pytest.raises(ValueError, match="outside"):
        bradley_terry.fit(2, [(0, 2, 1.0)])
    with pytest.raises(ValueError, match="ridge"):
        bradley_terry.fit(2, [(0, 1, 1.0)], ridge=0.0)


def test_the_elo_display():
    assert bradley_terry.elo(0.0) == 1000.0
    assert bradley_terry.elo(math.log(10.0)) == pytest.approx(1400.0)
    assert bradley_terry.from_elo(1400.0) == pytest.approx(math.log(10.0))
    assert bradley_terry.from_elo(bradley_terry.elo(-0.7)) == pytest.approx(-0.7)


def test_a_fit_that_does_not_converge_raises():
    observations = random_observations(2, n=6, count=20)
    with pytest.raises(bradley_terry.FitError, match="did not converge after 1 iterations"):
        bradley_terry.fit(6, observations, max_iterations=1)
    bradley_terry.fit(6, observations)  # the same data, given the steps it needs


def test_the_components_of_the_comparison_graph():
    assert bradley_terry.components(4, []) == 4  # nothing compared: each item alone
    assert bradley_terry.components(4, [(0, 1, 1.0), (2, 3, 0.0)]) == 2
    assert bradley_terry.components(4, [(0, 1, 1.0), (2, 3, 0.0), (3, 1, 0.5)]) == 1
    assert bradley_terry.components(5, [(0, 1, 1.0), (1, 2, 1.0), (2, 0, 1.0)]) == 3  # {0,1,2}, {3}, {4}


def test_the_bootstrap_matches_refitting_every_resample_with_the_fit():
    observations = random_observations(5, n=8, count=30)
    groups = [[o, (o[0], o[1], 1.0 - o[2])] if i % 3 == 0 else [o] for i, o in enumerate(observations)]
    fits = bradley_terry.bootstrap(8, groups, samples=40, seed=3)
    rng = random.Random(3)
    bradley_terry.fit(8, [o for g in groups for o in g])
    for got in fits:
        drawn = [groups[rng.randrange(len(groups))] for _ in groups]
        np.testing.assert_allclose(got, bradley_terry.fit(8, [o for g in drawn for o in g]), atol=1e-6)
    assert bradley_terry.bootstrap(8, groups, samples=40, seed=3) == fits  # seeded


def test_percentile_interval():
    low, high = bradley_terry.percentile_interval(list(range(101)))
    assert (low, high) == pytest.approx((2.5, 97.5))


def noisy_judge(rng: random.Random, difference: float, noise: float = 0.5) -> float:
    """A judge whose score follows the true difference of strengths, with Gaussian noise."""
    return max(-1.0, min(1.0, math.tanh(difference) + rng.gauss(0.0, noise)))


def recovered(seed: int, members: int, how: str) -> float:
    """Spearman correlation of the zELO with the true strengths: K = 25, 4 random cycles."""
    rng = random.Random(seed)
    truth = [rng.gauss(0.0, 1.5) for _ in range(25)]
    observations = []
    for matchup in zelo.plan_matchups(25, 4, seed):
        a, b = matchup.shown
        shown = combine_scores([noisy_judge(rng, truth[b] - truth[a]) for _ in range(members)], how)
        score = -shown if matchup.swapped else shown
        observations.append((matchup.a, matchup.b, (1.0 + score) / 2.0))
    assert len(observations) == 100
    return float(spearmanr(bradley_terry.fit(25, observations), truth).statistic)


def test_recovery_of_known_strengths_from_an_ensemble_of_noisy_judges():
    for seed in range(10):
        assert recovered(seed, members=3, how="mean") >= 0.9
    assert np.mean([recovered(seed, members=3, how="vote") for seed in range(10)]) >= 0.9


def test_recovery_from_one_noisy_judge_on_average():
    assert np.mean([recovered(seed, members=1, how="mean") for seed in range(10)]) >= 0.9
