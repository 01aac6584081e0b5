"""An embedding model as a benchmark test sees it.

Backends implement `_encode(texts)` (a batch in, unit-length float32 rows out); this class
adds the query and document prefixes, the embedding cache and cosine similarity.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plugin.models.spec import ModelSpec
from plugin.models.usage import current_usage

if TYPE_CHECKING:
    import numpy as np

    from plugin.models.embedding_cache import EmbeddingCache


class Embedder:
    kind = "embedder"

    def __init__(self, spec: ModelSpec, cache: EmbeddingCache | None = None) -> None:
        self.spec = spec
        self.id = spec.id
        self.cache = cache
        self._fingerprint: str | None = None

    def _encode(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._embed([self.spec.document_prefix + t for t in texts])

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._embed([self.spec.query_prefix + t for t in texts])

    @property
    def fingerprint(self) -> str:
        """The md5 of the spec's output fingerprint: the cache's model key."""
        if self._fingerprint is None:
            from plugin.keys import md5_of

            self._fingerprint = md5_of(self.spec.output_fingerprint())
        return self._fingerprint

    def _embed(self, texts: list[str]) -> np.ndarray:
        """Rows for `texts` (prefixes applied) in order: cached ones read, the distinct misses
        encoded in one batch and stored."""
        import numpy as np

        if not texts:
            return np.asarray(self._encode([]), dtype=np.float32)
        unique = list(dict.fromkeys(texts))
        vectors: dict[str, np.ndarray] = {}
        if self.cache is not None:
            for text, vector in zip(unique, self.cache.get_many(self.fingerprint, unique), strict=True):
                if vector is not None:
                    vectors[text] = vector
        misses = [t for t in unique if t not in vectors]
        usage = current_usage.get()
        if usage is not None:
            usage.texts_embedded += len(misses)
            usage.embedding_cache_hits += len(unique) - len(misses)
        if misses:
            encoded = np.asarray(self._encode(misses), dtype=np.float32)
            if self.cache is not None:
                self.cache.put_many(self.fingerprint, misses, encoded)
            vectors.update(zip(misses, encoded, strict=True))
        return np.stack([vectors[t] for t in texts]).astype(np.float32, copy=False)

    def similarities(self, query: str, documents: list[str]) -> list[float]:
        """Cosine similarity of one query to each document (rows are unit length)."""
        query_vector = self.embed_queries([query])[0]
        return [float(x) for x in self.embed_documents(documents) @ query_vector]

    def close(self) -> None:
        pass


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    import numpy as np

    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)
