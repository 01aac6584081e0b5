"""What one stored item shows when it is opened: in the explorer page (`ragmatrix view`) and in
the terminal (`ragmatrix show`), as parts that both render.

A family says what its items show with an `ItemView` on its descriptor: what was asked (the
case: messages, the query, the expected answer) and what came back in each iteration (the
answer, the ranking, the battles). Every text here is data, never markup: the page sets it as
text and the terminal strips its control characters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ragmatrix.results.rows import Iteration, Row
from ragmatrix.seam.case import Case


@dataclass
class Fields:
    """Named values: `parsed: yes`, `expected: no`."""

    title: str
    pairs: list[tuple[str, str]]


@dataclass
class Listing:
    """A small table; `marked` rows are the ones that count (relevant, holding the answer)."""

    title: str
    header: list[str]
    rows: list[list[str]]
    marked: list[bool] = field(default_factory=list)
    numeric: set[int] = field(default_factory=set)  # right-aligned columns


@dataclass
class Text:
    """Text shown as written: a message, an answer, a chunk."""

    title: str
    text: str


Part = Fields | Listing | Text


@dataclass(frozen=True)
class ItemView:
    """How a family's items read. `asked(case, row)`: what the item put to the model, from its
    case (called only where the case is at hand; the row says which test and model asked).
    `answered(iteration, case)`: what one iteration recorded, beside the case where it is at
    hand (None where the data files no longer hold it)."""

    asked: Callable[[Case[Any, Any], Row], list[Part]] | None = None
    answered: Callable[[Iteration, Case[Any, Any] | None], list[Part]] | None = None


def to_json(part: Part) -> dict[str, Any]:
    """A part as the explorer page reads it."""
    if isinstance(part, Fields):
        return {"kind": "fields", "title": part.title, "pairs": [list(pair) for pair in part.pairs]}
    if isinstance(part, Listing):
        return {
            "kind": "listing",
            "title": part.title,
            "header": part.header,
            "rows": part.rows,
            "marked": part.marked,
            "numeric": sorted(part.numeric),
        }
    return {"kind": "text", "title": part.title, "text": part.text}


def number(value: Any, digits: int = 4) -> str:
    """A stored number as shown: at most `digits` decimals, no trailing zeros; `-` for none."""
    kind = type(value)
    if kind is float:
        text = f"{value:.{digits}f}".rstrip("0").rstrip(".")
        return text if text not in ("", "-0") else "0"
    if kind is int:
        return str(value)
    return "-" if value is None else str(value)
