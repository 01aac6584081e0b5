"""The base of ragmatrix's own pydantic models: each builds its validator and serializer when it
is first used, not when its module is imported.

Building them is most of what defining a model costs, about a millisecond each. A benchmark run
imports some forty models and needs few of them before its first request (the models file's
entries, the cases of its data files); the rows, cost records and report models are built once
the first answers are on their way, and a family's models only in a run that uses the family.
The first use may come from the loop's thread and the items' thread at once: pydantic builds a
deferred model under a lock from 2.14 on, the lowest version the project accepts.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class DataModel(BaseModel):
    model_config = ConfigDict(defer_build=True)


def empty_list() -> list[Any]:
    """A new empty list: `Field(default_factory=empty_list)` rather than `list` in these models.
    pydantic reads a default factory's signature as it builds a model, and a builtin's is parsed
    from its text with tokenize's patterns, compiled on first use: about 2 ms of CPU before a
    run's first request (the models file's entries, the cases). A function's is read directly."""
    return []
