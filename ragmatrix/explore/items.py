"""A stored row beside its family's descriptor and the case it was run on, and what the item
shows when it is opened: what was asked, and what each iteration recorded.

The case comes from the data files as they read now (`ragmatrix.suite.lookup`); where they no
longer hold it, the item shows what its row recorded and says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ragmatrix.results.rows import Iteration, Row
from ragmatrix.seam.case import Case
from ragmatrix.seam.detail import Fields, Listing, Part, Text, number
from ragmatrix.seam.family import Family

# The most characters of a recorded field shown when the family says nothing of it.
RAW_CHARS = 2000
USAGE = (
    ("calls", "model calls"),
    ("cached_calls", "calls from the response cache"),
    ("prompt_tokens", "prompt tokens"),
    ("completion_tokens", "completion tokens"),
    ("texts_embedded", "texts embedded"),
    ("embedding_cache_hits", "texts from the embedding cache"),
)


@dataclass
class StoredItem:
    row: Row
    family: Family[Any, Any] | None = None
    case: Case[Any, Any] | None = None

    @property
    def test_id(self) -> str:
        """The item's pytest id, as `pytest benchmark` names it: `test[model-case:variant]`."""
        return f"{self.row.test}[{self.row.model}-{self.row.item}]"

    @property
    def names(self) -> list[str]:
        """What a `-k` expression matches: the test id and the names in it, and the family."""
        row = self.row
        return [self.test_id, row.family, row.model, row.case, row.variant, row.item, row.test]

    @property
    def failing(self) -> bool:
        """An error, an invalid answer, or a score below half of the best score its family
        can give (0.5 on a 0..1 scale)."""
        row = self.row
        if not row.ok or row.invalid:
            return True
        score = row.item_score()
        if score is None:
            return True
        if self.family is not None and self.family.headline.scale == "0..1":
            return (score < 0.5) if self.family.headline.higher_is_better else (score > 0.5)
        return False


@dataclass
class Detail:
    """An item opened: a summary, what was asked, and each iteration's parts."""

    summary: Fields
    asked: list[Part] = field(default_factory=list)
    iterations: list[list[Part]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def join(
    rows: Mapping[str, Iterable[Row]],
    families: Mapping[str, Family[Any, Any]],
    cases: Mapping[tuple[str, str], Case[Any, Any]],
) -> list[StoredItem]:
    """Every row with its family and case (each None where unknown), in store order."""
    return [
        StoredItem(row, families.get(family), cases.get((family, row.item)))
        for family, family_rows in sorted(rows.items())
        for row in family_rows
    ]


def detail(item: StoredItem) -> Detail:
    row, family, case = item.row, item.family, item.case
    opened = Detail(_summary(item))
    view = family.item_view if family is not None else None
    if case is None:
        opened.notes.append("the data files hold this case no more: what was asked is not shown")
    elif view is not None and view.asked is not None:
        opened.asked = _guarded("what was asked", view.asked, case, row)
    for index, iteration in enumerate(row.iterations, start=1):
        parts: list[Part] = [_iteration_fields(index, iteration)]
        if iteration.error is None:
            if view is not None and view.answered is not None:
                parts += _guarded("what it recorded", view.answered, iteration, case)
            else:
                parts += _raw(iteration)
        metrics = iteration.numeric_metrics()
        if metrics:
            rows = [[name, number(value)] for name, value in sorted(metrics.items())]
            parts.append(Listing("metrics", ["metric", "value"], rows, numeric={1}))
        opened.iterations.append(parts)
    return opened


def _summary(item: StoredItem) -> Fields:
    row = item.row
    score = row.item_score()
    pairs = [
        ("model", row.model),
        ("family", row.family),
        ("case", row.case),
        ("variant", row.variant or "-"),
        ("test id", item.test_id),
        ("status", row.status),
        ("score", number(score) if score is not None else "- (an error has no score)"),
        ("iterations", str(row.iteration_count)),
        ("errors", str(row.errors)),
        ("invalid answers", str(row.invalid)),
    ]
    pairs += [(name, number(row.usage[key])) for key, name in USAGE if row.usage.get(key)]
    pairs += [
        ("duration", f"{number(row.duration_s, 3)} s" if row.duration_s is not None else "-"),
        ("recorded at", row.recorded_at or "-"),
        ("provenance", row.provenance.label()),
        ("result key", row.key),
        ("data file", item.case.file if item.case is not None else "- (the case is not in the data files now)"),
    ]
    if item.family is not None and item.family.source is not None:
        pairs.append(("source", item.family.source.line()))
    return Fields("item", pairs)


def _iteration_fields(index: int, iteration: Iteration) -> Fields:
    pairs = [("score", number(iteration.score) if iteration.score is not None else "-")]
    if iteration.valid is not None:
        pairs.append(("valid", "yes" if iteration.valid else "no"))
    if iteration.invalid_reason:
        pairs.append(("why invalid", iteration.invalid_reason))
    if iteration.error:
        pairs.append(("error", iteration.error))
    if iteration.duration_s is not None:
        pairs.append(("duration", f"{number(iteration.duration_s, 4)} s"))
    cut = iteration.details.get("answers_cut")
    if cut:
        pairs.append(("answers cut at the length limit", number(cut)))
    return Fields(f"iteration {index}", pairs)


def _raw(iteration: Iteration) -> list[Part]:
    """A family that says nothing of its fields: each shown as recorded, long ones cut."""
    pairs = []
    for name, value in sorted(iteration.details.items()):
        if name in ("answers_cut",):
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
        pairs.append((name, text if len(text) <= RAW_CHARS else text[:RAW_CHARS] + " ..."))
    return [Fields("recorded", pairs)] if pairs else []


def _guarded(what: str, make: Callable[..., list[Part]], *args: Any) -> list[Part]:
    """A family's parts; a row its view cannot read (an older shape) shows a line instead."""
    try:
        return list(make(*args))
    except Exception as error:  # a family's view must never cost the page or the other items
        return [Text(f"{what}: not shown", f"{type(error).__name__}: {error}")]
