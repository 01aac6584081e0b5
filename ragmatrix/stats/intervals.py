"""One interval per number, chosen one way everywhere: the headline tables, the metric tables
and the breakdowns all call `interval`, so one mean never shows two intervals.

Values come grouped by case (a case's prompt variants, chunkings and iterations are not
independent draws):

- several values in some case, and at least `MIN_CASES_TO_CLUSTER` cases: a percentile
  bootstrap that resamples whole cases (the statistic is the pooled mean);
- otherwise yes/no outcomes (every value 0 or 1, and the family's scores are not declared
  continuous): a Wilson score interval, the values counted as trials;
- otherwise two values or more: a percentile bootstrap over the values;
- a single continuous value has no interval at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragmatrix.stats.metrics import bootstrap_interval, cluster_bootstrap_interval, wilson_interval

# Fewer cases than this and a case bootstrap would say nothing: the values are resampled instead.
MIN_CASES_TO_CLUSTER = 5

WILSON = "Wilson"
BOOTSTRAP = "bootstrap"
CASE_BOOTSTRAP = "case bootstrap"
NO_INTERVAL = "none"


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float | None
    high: float | None
    method: str

    def to_json(self) -> list[float | str | None]:
        return [self.mean, self.low, self.high, self.method]

    @classmethod
    def from_json(cls, value: Sequence[float | str | None]) -> Interval:
        mean, low, high, method = value
        return cls(float(mean or 0.0), _float(low), _float(high), str(method))


def _float(value: float | str | None) -> float | None:
    return None if value is None else float(value)


def is_binary(values: Sequence[float]) -> bool:
    return all(v in (0.0, 1.0) for v in values)


def interval_method(groups: Sequence[Sequence[float]], binary: bool | None = None) -> str:
    """`binary`: the scores are yes/no outcomes (True), continuous (False), or unknown (None:
    judged from the values)."""
    values = [v for group in groups for v in group]
    if not values:
        return NO_INTERVAL
    if any(len(group) > 1 for group in groups) and len(groups) >= MIN_CASES_TO_CLUSTER:
        return CASE_BOOTSTRAP
    # An undeclared score type is taken for yes/no only when several values say so: one 1.0
    # could as well be a perfect nDCG, which must not get a Wilson interval.
    if is_binary(values) and (binary or (binary is None and len(values) > 1)):
        return WILSON
    return BOOTSTRAP if len(values) > 1 else NO_INTERVAL


def interval(groups: Sequence[Sequence[float]], binary: bool | None = None) -> Interval:
    """The mean of every value, and its 95% interval by `interval_method`."""
    groups = [list(group) for group in groups if group]
    values = [v for group in groups for v in group]
    if not values:
        raise ValueError("no values")
    mean = sum(values) / len(values)
    method = interval_method(groups, binary)
    if method == CASE_BOOTSTRAP:
        mean, low, high = cluster_bootstrap_interval(groups)
        return Interval(mean, low, high, method)
    if method == WILSON:
        low, high = wilson_interval(int(sum(values)), len(values))
        return Interval(mean, low, high, method)
    if method == BOOTSTRAP:
        low, high = bootstrap_interval(values)
        # every value equal: the resampled means may round a hair off the mean, which must stay inside
        return Interval(mean, min(low, mean), max(high, mean), method)
    return Interval(mean, None, None, method)
