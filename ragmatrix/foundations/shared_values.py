"""Equal values held once, for the objects a large matrix holds by the hundred thousand (cases,
stored rows).

pydantic keeps, on every model instance, the set of the fields it was given: for a row of a
dozen fields that set is about half of the row's memory, and it is the same set on nearly every
row. `SharedValues.fields_set_of` gives a model the one set held for its fields; `one` does the
same for any other equal value (a name, a provenance, usage counts). A memo of values that
mostly differ (an LLM item's token counts) is bounded: it is emptied when it holds too many.

What is shared must not be changed in place: these objects are read after they are built.
Setting a field on a model that shares its set would mark it set on every model sharing it
(pydantic's serializer takes no frozen set, so the sets stay plain).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class SharedValues:
    def __init__(self, held_at_most: int | None = None) -> None:
        self._held: dict[tuple[str, Any], Any] = {}
        self._held_at_most = held_at_most

    def one(self, kind: str, key: Any, value: Any) -> Any:
        """The value held for `key` (`value` itself, the first time)."""
        held = self._held.get((kind, key))
        if held is not None:
            return held
        if self._held_at_most is not None and len(self._held) >= self._held_at_most:
            self._held.clear()
        return self._held.setdefault((kind, key), value)

    def __len__(self) -> int:
        return len(self._held)

    def fields_set_of(self, model: BaseModel) -> None:
        """Share the set of `model`'s given fields (not those of the models inside it)."""
        given = model.__pydantic_fields_set__
        object.__setattr__(model, "__pydantic_fields_set__", self.one("fields", frozenset(given), given))
