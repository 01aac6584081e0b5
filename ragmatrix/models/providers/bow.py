"""`builtin: bow`: the lexical bag-of-words baseline (an embedder; no weights, no package)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from ragmatrix.models.providers import provider
from ragmatrix.models.spec import BuiltinBaseline, EmbedderSpec

if TYPE_CHECKING:
    from ragmatrix.models.protocols import Model
    from ragmatrix.models.spec import ModelBuilder

# The version of the algorithm (tokenizer, dimensions): part of the fingerprint, so bump it
# whenever ragmatrix/models/lexical.py would score differently. It keys stored results and the
# embedding cache alike.
VERSION = 1


@provider("bow")
class BagOfWordsSpec(BuiltinBaseline, EmbedderSpec):
    provider: Literal["bow"] = "bow"
    key: ClassVar[str | None] = "builtin"
    value: ClassVar[str | None] = "bow"
    kinds: ClassVar[tuple[str, ...]] = ("embedder",)
    rank: ClassVar[int] = 30
    describe: ClassVar[str] = "builtin: bow"
    builtin: Literal["bow"] = "bow"
    max_seq_length: int | None = None  # read by no one, but part of the key since the first results

    def algorithm(self) -> str:
        return f"bow@{VERSION}"

    def build(self, models: ModelBuilder) -> Model:
        from ragmatrix.models.embedder import EmbeddingModel
        from ragmatrix.models.lexical import HashingBagOfWords

        # No embedding cache: counting a text's words is cheaper than reading 16 KB back.
        return EmbeddingModel(self, HashingBagOfWords(), None)
