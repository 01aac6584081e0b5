"""The check families: domain logic free of pytest.

Each family module exports `SCORING_VERSION` (bumped whenever scoring changes, so that old
results are recomputed) and, optionally, a pydantic case schema. The schema registry is
lazy: naming a family imports only its module, and only when its cases are loaded.
"""

from __future__ import annotations

import importlib
from typing import Any

# family name -> "module:SchemaClass"
CASE_SCHEMAS: dict[str, str] = {
    "rag_interpretation": "plugin.families.rag:RagCase",
    "code_retrieval": "plugin.families.code_retrieval:CodeRetrievalCase",
    "rss_probes": "plugin.families.rss:RssCase",
    "zelo_battles": "plugin.families.zelo:ZeloCase",
}


def schema_for(family: str) -> Any | None:
    """The pydantic model that validates an expanded case of `family`, or None."""
    target = CASE_SCHEMAS.get(family)
    if target is None:
        return None
    module_name, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module_name), attribute)
