"""Equal values held once, for the objects a large matrix holds by the hundred thousand (cases,
stored rows).

pydantic keeps, on every model instance, the set of the fields it was given: for a row of a
dozen fields that set is about half of the row's memory, and it is the same set on nearly every
row. `SharedValues.fields_of` gives each model (and every model nested in it) the one set held
for its fields; `one` does the same for any other equal value (a name, a provenance).

What is shared must not be changed in place: these objects are read after they are built.
Setting a field on a model that shares its set would mark it set on every model sharing it
(pydantic's serializer takes no frozen set, so the sets stay plain).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class SharedValues:
    def __init__(self) -> None:
        self._held: dict[tuple[str, Any], Any] = {}

    def one(self, kind: str, key: Any, value: Any) -> Any:
        """The value held for `key` (`value` itself, the first time)."""
        return self._held.setdefault((kind, key), value)

    def fields_set_of(self, model: BaseModel) -> None:
        """Share the set of `model`'s given fields (not those of the models inside it)."""
        given = model.__pydantic_fields_set__
        object.__setattr__(model, "__pydantic_fields_set__", self.one("fields", frozenset(given), given))

    def fields_of(self, value: Any) -> None:
        """Share the field sets of `value` and of every model inside it (in fields, lists,
        tuples and dicts)."""
        if isinstance(value, BaseModel):
            self.fields_set_of(value)
            for inner in value.__dict__.values():
                self.fields_of(inner)
            for inner in (value.__pydantic_extra__ or {}).values():
                self.fields_of(inner)
        elif isinstance(value, list | tuple):
            for inner in value:
                self.fields_of(inner)
        elif isinstance(value, dict):
            for inner in value.values():
                self.fields_of(inner)
