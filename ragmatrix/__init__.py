"""ragmatrix: a pytest-driven benchmark suite for the models behind retrieval-augmented generation.

The public face is below (`__all__`); every other module is private and may change. The names
are imported on first use, so `import ragmatrix` stays cheap. The pytest plugin itself is
`ragmatrix.plugin`, which pytest loads through the package's `pytest11` entry point.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragmatrix.blocks import Block, Bullets, Heading, Image, Paragraph, Table
    from ragmatrix.case import Case, CaseInputError
    from ragmatrix.cost.figures import FamilyCosts
    from ragmatrix.drawing import PlotContext
    from ragmatrix.family import Family, Plot
    from ragmatrix.models.client import ModelError
    from ragmatrix.models.protocols import (
        ChatModel,
        Embedder,
        Judge,
        Messages,
        Model,
        PrefetchingChatModel,
        Retriever,
    )
    from ragmatrix.models.providers import provider
    from ragmatrix.models.spec import ModelSpec
    from ragmatrix.outcome import Outcome
    from ragmatrix.tables import FamilyTable, Headline

# Each public name and the module that defines it. A family's descriptor and its callbacks are
# typed with these: the case, the models, the family's table, the report blocks, the plot
# context and the cost figures.
_HOMES = {
    "Block": "ragmatrix.blocks",
    "Bullets": "ragmatrix.blocks",
    "Case": "ragmatrix.case",
    "CaseInputError": "ragmatrix.case",
    "ChatModel": "ragmatrix.models.protocols",
    "Embedder": "ragmatrix.models.protocols",
    "Family": "ragmatrix.family",
    "FamilyCosts": "ragmatrix.cost.figures",
    "FamilyTable": "ragmatrix.tables",
    "Heading": "ragmatrix.blocks",
    "Headline": "ragmatrix.tables",
    "Image": "ragmatrix.blocks",
    "Judge": "ragmatrix.models.protocols",
    "Messages": "ragmatrix.models.protocols",
    "Model": "ragmatrix.models.protocols",
    "ModelError": "ragmatrix.models.client",
    "ModelSpec": "ragmatrix.models.spec",
    "Outcome": "ragmatrix.outcome",
    "Paragraph": "ragmatrix.blocks",
    "Plot": "ragmatrix.family",
    "PrefetchingChatModel": "ragmatrix.models.protocols",
    "PlotContext": "ragmatrix.drawing",
    "Retriever": "ragmatrix.models.protocols",
    "Table": "ragmatrix.blocks",
    "provider": "ragmatrix.models.providers",
}

__all__ = [
    "Block",
    "Bullets",
    "Case",
    "CaseInputError",
    "ChatModel",
    "Embedder",
    "Family",
    "FamilyCosts",
    "FamilyTable",
    "Heading",
    "Headline",
    "Image",
    "Judge",
    "Messages",
    "Model",
    "ModelError",
    "ModelSpec",
    "Outcome",
    "Paragraph",
    "Plot",
    "PlotContext",
    "PrefetchingChatModel",
    "Retriever",
    "Table",
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
