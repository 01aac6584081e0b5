"""The one number a family ranks models by, declared by the family's descriptor.

Its own module, so that a family (imported before a run's first request) does not import the
leaderboard's tables, their statistics and their dataclasses (`ragmatrix.seam.tables`), which
only the end of a run and the report need.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Headline:
    """The one number a family ranks models by."""

    metric: str  # what the score is, in a few words: "accuracy", "file nDCG@10"
    description: str  # one sentence for the report
    scale: str = "0..1"  # shown beside every table of the family: "0..1", "RSS x500"
    higher_is_better: bool = True
    # Every score is 0 or 1 (a yes/no outcome): Wilson intervals and McNemar's test. False: a
    # continuous score, never a Wilson interval, even when its values happen to be 0 or 1.
    binary: bool = False

    @property
    def digits(self) -> int:
        """Decimals to show: three on a 0..1 scale, one on a wider one (RSS x500)."""
        return 3 if self.scale == "0..1" else 1
