"""ragmatrix: a pytest-driven benchmark suite for the models behind retrieval-augmented generation.

The public face is below (`__all__`); every other module is private and may change. The names
are imported on first use, so `import ragmatrix` stays cheap. The pytest plugin itself is
`ragmatrix.plugin`, which pytest loads through the package's `pytest11` entry point.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragmatrix.cost.figures import FamilyCosts
    from ragmatrix.explore.export import load_results
    from ragmatrix.models.client import ModelError
    from ragmatrix.models.protocols import (
        ChatModel,
        Embedder,
        Judge,
        Messages,
        Model,
        PrefetchingChatModel,
        Reranker,
        Retriever,
    )
    from ragmatrix.models.providers import provider
    from ragmatrix.models.spec import ModelSpec
    from ragmatrix.seam.blocks import Block, Bullets, Heading, Image, Paragraph, Table
    from ragmatrix.seam.case import Case, CaseInputError
    from ragmatrix.seam.drawing import PlotContext
    from ragmatrix.seam.family import Family, Plot
    from ragmatrix.seam.headline import Headline
    from ragmatrix.seam.outcome import Outcome
    from ragmatrix.seam.tables import FamilyTable

# Each public name and the module that defines it. A family's descriptor and its callbacks are
# typed with these: the case, the models, the family's table, the report blocks, the plot
# context and the cost figures. `load_results(path)` reads a results folder as a pandas
# DataFrame, one row per item and iteration.
_HOMES = {
    "Block": "ragmatrix.seam.blocks",
    "Bullets": "ragmatrix.seam.blocks",
    "Case": "ragmatrix.seam.case",
    "CaseInputError": "ragmatrix.seam.case",
    "ChatModel": "ragmatrix.models.protocols",
    "Embedder": "ragmatrix.models.protocols",
    "Family": "ragmatrix.seam.family",
    "FamilyCosts": "ragmatrix.cost.figures",
    "FamilyTable": "ragmatrix.seam.tables",
    "Heading": "ragmatrix.seam.blocks",
    "Headline": "ragmatrix.seam.headline",
    "Image": "ragmatrix.seam.blocks",
    "Judge": "ragmatrix.models.protocols",
    "load_results": "ragmatrix.explore.export",
    "Messages": "ragmatrix.models.protocols",
    "Model": "ragmatrix.models.protocols",
    "ModelError": "ragmatrix.models.client",
    "ModelSpec": "ragmatrix.models.spec",
    "Outcome": "ragmatrix.seam.outcome",
    "Paragraph": "ragmatrix.seam.blocks",
    "Plot": "ragmatrix.seam.family",
    "PrefetchingChatModel": "ragmatrix.models.protocols",
    "PlotContext": "ragmatrix.seam.drawing",
    "Reranker": "ragmatrix.models.protocols",
    "Retriever": "ragmatrix.models.protocols",
    "Table": "ragmatrix.seam.blocks",
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
    "Reranker",
    "Retriever",
    "Table",
    "load_results",
    "provider",
]


def __getattr__(name: str) -> Any:
    from ragmatrix.foundations.lazy import resolve

    return resolve(globals(), _HOMES, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
