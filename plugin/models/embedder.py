"""An embedding model as a benchmark test sees it.

Backends implement `_encode(texts)` (a batch in, unit-length float32 rows out); this class
adds the query and document prefixes and cosine similarity.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from plugin.models.spec import ModelSpec

if TYPE_CHECKING:
    import numpy as np


class Embedder:
    kind = "embedder"

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.id = spec.id

    def _encode(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._encode([self.spec.document_prefix + t for t in texts])

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode([self.spec.query_prefix + t for t in texts])

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
