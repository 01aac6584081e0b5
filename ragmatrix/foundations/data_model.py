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

from pydantic import BaseModel, ConfigDict


class DataModel(BaseModel):
    model_config = ConfigDict(defer_build=True)
