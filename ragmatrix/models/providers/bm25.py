"""`builtin: bm25`: BM25 over identifier-split tokens, a retriever (it ranks documents for a
query but has no vectors)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from ragmatrix.models.providers import provider
from ragmatrix.models.spec import BuiltinBaseline, TextSpec

if TYPE_CHECKING:
    from ragmatrix.models.protocols import Model
    from ragmatrix.models.spec import ModelBuilder

# The version of the algorithm (tokenizer, k1 and b): part of the fingerprint, so bump it
# whenever ragmatrix/models/bm25.py would score differently.
VERSION = 1


@provider("bm25", needs={"bm25s": "bm25s"})
class BM25Spec(BuiltinBaseline, TextSpec):
    provider: Literal["bm25"] = "bm25"
    key: ClassVar[str | None] = "builtin"
    value: ClassVar[str | None] = "bm25"
    kinds: ClassVar[tuple[str, ...]] = ("retriever",)
    rank: ClassVar[int] = 30
    describe: ClassVar[str] = "builtin: bm25"
    builtin: Literal["bm25"] = "bm25"
    max_seq_length: int | None = None  # read by no one, but part of the key since the first results

    def algorithm(self) -> str:
        return f"bm25@{VERSION}"

    def build(self, models: ModelBuilder) -> Model:
        from ragmatrix.models.bm25 import BM25Retriever

        return BM25Retriever(self)
