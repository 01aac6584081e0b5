"""ragmatrix: a pytest-driven benchmark suite for the models behind retrieval-augmented generation.

The public face is below (`__all__`); every other module is private and may change. The names
are imported on first use, so `import ragmatrix` stays cheap. The pytest plugin itself is
`ragmatrix.plugin`, which pytest loads through the package's `pytest11` entry point.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragmatrix.case import Case, CaseInputError
    from ragmatrix.families.base import Family, Headline, Plot
    from ragmatrix.models.client import ModelError
    from ragmatrix.models.protocols import ChatModel, Embedder, Judge, Model, Retriever
    from ragmatrix.models.providers import provider
    from ragmatrix.models.spec import ModelSpec
    from ragmatrix.outcome import Outcome

# Each public name and the module that defines it.
_HOMES = {
    "Case": "ragmatrix.case",
    "CaseInputError": "ragmatrix.case",
    "ChatModel": "ragmatrix.models.protocols",
    "Embedder": "ragmatrix.models.protocols",
    "Family": "ragmatrix.families.base",
    "Headline": "ragmatrix.families.base",
    "Judge": "ragmatrix.models.protocols",
    "Model": "ragmatrix.models.protocols",
    "ModelError": "ragmatrix.models.client",
    "ModelSpec": "ragmatrix.models.spec",
    "Outcome": "ragmatrix.outcome",
    "Plot": "ragmatrix.families.base",
    "Retriever": "ragmatrix.models.protocols",
    "provider": "ragmatrix.models.providers",
}

__all__ = [
    "Case",
    "CaseInputError",
    "ChatModel",
    "Embedder",
    "Family",
    "Headline",
    "Judge",
    "Model",
    "ModelError",
    "ModelSpec",
    "Outcome",
    "Plot",
    "Retriever",
    "provider",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'ragmatrix' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
