"""A persistent cache of rerank scores: `.benchmark_cache/rerank_scores.sqlite`.

A score is keyed by the reranker's fingerprint (the md5 of its output fingerprint) and the
(query, document) pair it scores. The store is an `EmbeddingCache` of its own file, each score a
vector of one value under the pair's text: the same WAL-mode SQLite, busy timeout and refused-write
handling, shared by xdist workers and concurrent runs. Only valid scores are stored: a document the
model gave no valid relevance is asked again next time.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ragmatrix.models.embedding_cache import EmbeddingCache

FILE_NAME = "rerank_scores.sqlite"


def pair_text(query: str, document: str) -> str:
    """The one text a pair is keyed by: NUL cannot occur in either, so no two pairs meet."""
    return f"{query}\x00{document}"


class RerankCache:
    """Scores per (model fingerprint, query, document), safe to share between processes."""

    def __init__(self, directory: Path | None = None) -> None:
        self._store = EmbeddingCache(directory, FILE_NAME)
        self.path = self._store.path

    def get_many(self, model_fp: str, query: str, documents: Sequence[str]) -> list[float | None]:
        """The cached score of each document for the query, None where there is none."""
        found = self._store.get_many(model_fp, [pair_text(query, d) for d in documents])
        return [None if vector is None or len(vector) != 1 else float(vector[0]) for vector in found]

    def put_many(self, model_fp: str, query: str, documents: Sequence[str], scores: Sequence[float]) -> None:
        """Store each document's score for the query, all in one transaction."""
        import numpy as np

        if not documents:
            return
        matrix = np.asarray(scores, dtype=np.float64).astype(np.float32).reshape(len(documents), 1)
        self._store.put_many(model_fp, [pair_text(query, d) for d in documents], matrix)

    def written_here(self, model_fp: str, query: str, documents: Sequence[str]) -> int:
        """How many of the pairs this run stored (the other hits come from earlier runs)."""
        return self._store.written_here(model_fp, [pair_text(query, d) for d in documents])

    def __len__(self) -> int:
        return len(self._store)

    def close(self) -> None:
        self._store.close()
