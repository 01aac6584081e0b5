"""What changed, item by item, between two result sets (`ragmatrix view --compare OLD`): each
item whose score or status moved, regressions first, worst first.

An item is the same item in both sets when its test, model and item id are (its result key
may differ: that is what a new prompt or model version changes). A move down a family's
scale (up, where lower is better) is a regression; an item that ran before and errs now is
one too, and comes first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ragmatrix.results.rows import Row
from ragmatrix.seam.family import Family

# Score moves smaller than this are rounding, not change.
TOLERANCE = 1e-9
KINDS = ("now an error", "regression", "improvement", "fixed", "new", "removed")


@dataclass(frozen=True)
class Change:
    family: str
    test: str
    model: str
    item: str
    old: float | None  # the item's score; None for an error or an item not in that set
    new: float | None
    kind: str  # one of KINDS

    @property
    def delta(self) -> float | None:
        return None if self.old is None or self.new is None else self.new - self.old


def changes(
    old: Mapping[str, Iterable[Row]], new: Mapping[str, Iterable[Row]], families: Mapping[str, Family[Any, Any]]
) -> list[Change]:
    """Every item that changed, in the order a reviewer reads them: new errors, regressions
    (largest first), improvements, fixed errors, new items, removed items."""
    found: list[Change] = []
    for family in sorted(set(old) | set(new)):
        before = {row.identity: row for row in old.get(family, [])}
        after = {row.identity: row for row in new.get(family, [])}
        descriptor = families.get(family)
        higher = descriptor.headline.higher_is_better if descriptor is not None else True
        for identity in sorted(set(before) | set(after)):
            test, model, item = identity
            was, now = before.get(identity), after.get(identity)
            kind = _kind(was, now, higher)
            if kind is not None:
                found.append(Change(family, test, model, item, _score(was), _score(now), kind))
    return sorted(found, key=_order(families))


def _score(row: Row | None) -> float | None:
    return row.item_score() if row is not None else None


def _kind(was: Row | None, now: Row | None, higher_is_better: bool) -> str | None:
    if was is None:
        return "new"
    if now is None:
        return "removed"
    if was.ok and not now.ok:
        return "now an error"
    if not was.ok and now.ok:
        return "fixed"
    before, after = was.item_score(), now.item_score()
    if before is None or after is None or abs(after - before) <= TOLERANCE:
        return None
    return "improvement" if (after > before) == higher_is_better else "regression"


def _order(families: Mapping[str, Family[Any, Any]]) -> Any:
    def key(change: Change) -> tuple[int, float, str, str, str]:
        descriptor = families.get(change.family)
        sign = 1.0 if descriptor is None or descriptor.headline.higher_is_better else -1.0
        worse_first = sign * (change.delta or 0.0) if change.kind == "regression" else -sign * (change.delta or 0.0)
        return (KINDS.index(change.kind), worse_first, change.family, change.model, change.item)

    return key
