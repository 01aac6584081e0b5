"""The bag-of-words counts kept the way any embedder's rows are: dense, through the embedding
cache, embedded ahead and in blocks. The `bow` baseline itself keeps no cache and indexes sparse
rows (`ragmatrix.models.lexical`); tests of what the wrapper does for an embedder (caching,
progress, blocks, usage) use this one. A benchmark project gets it with a conftest that imports
this module, calls `register()`, and has an entry `{id: ..., kind: embedder, dense_words: true}`;
a test restores the registry afterwards (the `dense_words` fixture), so that no other test sees
a provider the package does not have."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from ragmatrix.models.embedder import EmbeddingModel, EmbeddingProvider
from ragmatrix.models.lexical import HashingBagOfWords
from ragmatrix.models.providers import provider
from ragmatrix.models.spec import EmbedderSpec

CONFTEST = "import dense_words\n\ndense_words.register()\n"


class DenseWords(HashingBagOfWords):
    index = EmbeddingProvider.index  # no rows of its own: the wrapper keeps a dense matrix


class DenseWordsSpec(EmbedderSpec):
    provider: Literal["dense_words"] = "dense_words"
    key: ClassVar[str | None] = "dense_words"
    kinds: ClassVar[tuple[str, ...]] = ("embedder",)
    describe: ClassVar[str] = "dense bag-of-words (tests)"
    dense_words: bool = True

    def fingerprint(self) -> dict[str, Any]:
        return {"provider": "dense_words"}

    def build(self, models: Any) -> EmbeddingModel:
        return EmbeddingModel(self, DenseWords(), models.embedding_cache())


def register() -> None:
    provider("dense_words")(DenseWordsSpec)
