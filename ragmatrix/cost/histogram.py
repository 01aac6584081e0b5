"""A latency histogram that merges exactly: log-spaced buckets, each a count.

Bucket `i` holds the values in [GROWTH_BASE**i, GROWTH_BASE**(i + 1)) milliseconds, so every
value is kept to within 2 % of itself whatever its size, and the stored form is a sparse
`{bucket: count}` map whose size depends on the spread of the values, not on their number.
Two histograms of the same model and device (two runs, two xdist workers, two machines) merge
by adding counts, and a quantile of the merged histogram is the quantile of all the values
together, to that same 2 %: percentiles of percentiles would be wrong, counts are not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

GROWTH = 0.02  # each bucket is 2 % wider than the one below it
GROWTH_BASE = 1.0 + GROWTH
SMALLEST_MS = 0.001  # values below this (a clock's resolution) share its bucket


def bucket_of(ms: float) -> int:
    return math.floor(math.log(max(ms, SMALLEST_MS)) / math.log(GROWTH_BASE))


def bucket_value(bucket: int) -> float:
    """The geometric middle of a bucket: within 1 % of every value in it."""
    return float(GROWTH_BASE ** (bucket + 0.5))


@dataclass
class LatencyHistogram:
    """Counts of latencies (ms) per log-spaced bucket."""

    counts: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of(cls, values: Iterable[float]) -> LatencyHistogram:
        histogram = cls()
        for value in values:
            histogram.add(value)
        return histogram

    @property
    def count(self) -> int:
        return sum(self.counts.values())

    def add(self, ms: float, times: int = 1) -> None:
        bucket = bucket_of(ms)
        self.counts[bucket] = self.counts.get(bucket, 0) + times

    def merge(self, other: LatencyHistogram) -> LatencyHistogram:
        """A new histogram holding the values of both."""
        merged = dict(self.counts)
        for bucket, count in other.counts.items():
            merged[bucket] = merged.get(bucket, 0) + count
        return LatencyHistogram(merged)

    def quantile(self, q: float) -> float | None:
        """The nearest-rank quantile (q in 0..1): the value of rank ceil(q * n), to within 2 %.
        None for an empty histogram."""
        total = self.count
        if total == 0:
            return None
        rank = max(1, math.ceil(q * total))
        seen = 0
        for bucket in sorted(self.counts):
            seen += self.counts[bucket]
            if seen >= rank:
                return bucket_value(bucket)
        return bucket_value(max(self.counts))  # not reached: seen ends at total >= rank

    def to_json(self) -> dict[str, Any]:
        return {"growth": GROWTH, "counts": {str(b): c for b, c in sorted(self.counts.items())}}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> LatencyHistogram:
        """A stored histogram; one stored with another growth is re-binned by its buckets'
        middles, so old records still merge."""
        if not data:
            return cls()
        growth = float(data.get("growth", GROWTH))
        counts = {int(b): int(c) for b, c in dict(data.get("counts") or {}).items() if int(c) > 0}
        if growth == GROWTH:
            return cls(counts)
        histogram = cls()
        for bucket, count in counts.items():
            histogram.add(float((1.0 + growth) ** (bucket + 0.5)), count)
        return histogram
