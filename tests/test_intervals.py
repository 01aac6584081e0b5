"""Leaderboard intervals when a case gives several values (prompt variants, chunkings)."""

from __future__ import annotations

import pytest

from ragmatrix.families import all_families
from ragmatrix.report.aggregate import aggregate
from ragmatrix.results.rows import Row
from ragmatrix.stats.intervals import interval
from ragmatrix.stats.metrics import bootstrap_interval, cluster_bootstrap_interval

DATA = [0.2, 0.9, 0.4, 0.7, 0.1, 0.8, 0.6, 0.3]


def test_copies_within_a_case_add_no_information():
    tripled = [[value] * 3 for value in DATA]
    mean, low, high = cluster_bootstrap_interval(tripled)
    assert mean == pytest.approx(sum(DATA) / len(DATA))
    # resampling whole cases sees 8 values, as it should; resampling items would see 24
    assert (low, high) == pytest.approx(bootstrap_interval(DATA))
    naive_low, naive_high = bootstrap_interval([v for group in tripled for v in group])
    assert naive_high - naive_low < 0.75 * (high - low)


def test_the_pooled_mean_weighs_every_value_once():
    mean, low, high = cluster_bootstrap_interval([[1.0, 0.0, 0.0], [1.0], [0.5, 0.5]])
    assert mean == pytest.approx(3.0 / 6)
    assert low <= mean <= high
    assert cluster_bootstrap_interval([[0.4, 0.4], [0.4]]) == pytest.approx((0.4, 0.4, 0.4))


def row(model: str, case: str, variant: str, score: float) -> Row:
    item = f"{case}:{variant}"
    return Row.model_validate(
        {
            "key": f"{model}-{item}",
            "family": "fam",
            "test": "test_fam",
            "model": model,
            "case": case,
            "item": item,
            "status": "ok",
            "scoring_version": 1,
            "n_iterations": 1,
            "iterations": [{"score": score}],
        }
    )


def test_the_leaderboard_resamples_cases_when_a_case_has_several_items(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMATRIX_CACHE_DIR", str(tmp_path))
    rows = [row("m", f"case{i}", v, s) for i, s in enumerate(DATA) for v in ("a", "b", "c")]
    (line,) = aggregate({"fam": rows}, all_families()).families[0].lines
    assert (line.n, line.items) == (24, 24)
    assert (line.low, line.high) == pytest.approx(bootstrap_interval(DATA))


def test_an_interval_always_holds_its_mean():
    # eight equal values: the resampled means round a hair off the plain mean, which must stay inside
    result = interval([[0.95]] * 8, binary=False)
    assert result.low is not None and result.high is not None
    assert result.low <= result.mean <= result.high
