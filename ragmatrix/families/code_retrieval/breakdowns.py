"""Rows grouped by what a case is: its query type, difficulty or tags.

Where the values are: every iteration of a code retrieval row (`row["iterations"][i]`) holds
`query_type` ("code" | "doc"), `difficulty` ("easy" | "medium" | "hard" | "extra_hard") and,
when the case has tags, `tags` (a list). They come from the case, so every iteration of a row
holds the same values; an error iteration holds none, and the row then falls in no group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def breakdown_value(row: Mapping[str, Any], field: str) -> Any:
    """The row's value of a breakdown field, read from its first iteration that has it."""
    for iteration in row.get("iterations") or []:
        if isinstance(iteration, Mapping) and field in iteration:
            return iteration[field]
    return None


def group_rows(rows: Iterable[Mapping[str, Any]], field: str) -> dict[Any, list[Mapping[str, Any]]]:
    """Rows by their value of `field`, in order of first appearance; a row with a list of values
    (tags) joins the group of each, a row without the field none."""
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for row in rows:
        value = breakdown_value(row, field)
        for one in value if isinstance(value, list) else [value]:
            if one is not None:
                groups.setdefault(one, []).append(row)
    return groups
