"""An embedding model as a benchmark test sees it.

Backends implement `_encode(texts)` (a batch in, unit-length float32 rows out); this class
adds the query and document prefixes, the embedding cache and cosine similarity.
"""

from __future__ import annotations

import time
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
        self._warmed_up = False
        # Texts embedded ahead of the items that need them (see `prefetch`): text -> (row,
        # read from the cache). Kept for the session, so that it works without a cache too.
        self._ahead: dict[str, tuple[np.ndarray, bool]] = {}
        self._ahead_used: set[str] = set()

    def _encode(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return self._embed([self.spec.document_prefix + t for t in texts])

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._embed([self.spec.query_prefix + t for t in texts])

    def prefetch(self, queries: list[str], documents: list[str]) -> None:
        """Embed the texts of many items now, in one batch (the backend splits it by
        `batch_size`): the items then find their rows here instead of embedding a few texts
        each. Usage is counted when an item takes a row, as if it had embedded it."""
        import numpy as np

        texts = [self.spec.query_prefix + q for q in queries] + [self.spec.document_prefix + d for d in documents]
        unique = [t for t in dict.fromkeys(texts) if t not in self._ahead]
        if not unique:
            return
        if self.cache is not None:
            for text, vector in zip(unique, self.cache.get_many(self.fingerprint, unique), strict=True):
                if vector is not None:
                    self._ahead[text] = (vector, True)
        misses = [t for t in unique if t not in self._ahead]
        if misses:
            encoded = np.asarray(self._encode(misses), dtype=np.float32)
            if self.cache is not None:
                self.cache.put_many(self.fingerprint, misses, encoded)
            self._ahead.update((t, (row, False)) for t, row in zip(misses, encoded, strict=True))

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
        # Rows embedded ahead count as the first item that takes them would have counted them.
        embedded_ahead = 0
        for text in unique:
            if text in self._ahead:
                vectors[text], cached = self._ahead[text]
                embedded_ahead += int(not cached and text not in self._ahead_used)
                self._ahead_used.add(text)
        looked_up = [t for t in unique if t not in vectors]
        if self.cache is not None and looked_up:
            for text, vector in zip(looked_up, self.cache.get_many(self.fingerprint, looked_up), strict=True):
                if vector is not None:
                    vectors[text] = vector
        misses = [t for t in unique if t not in vectors]
        usage = current_usage.get()
        if usage is not None:
            usage.texts_embedded += len(misses) + embedded_ahead
            usage.embedding_cache_hits += len(unique) - len(misses) - embedded_ahead
        if misses:
            encoded = np.asarray(self._encode(misses), dtype=np.float32)
            if self.cache is not None:
                self.cache.put_many(self.fingerprint, misses, encoded)
            vectors.update(zip(misses, encoded, strict=True))
        return np.stack([vectors[t] for t in texts]).astype(np.float32, copy=False)

    @property
    def context_limit(self) -> int | None:
        """Tokens the model reads before it truncates silently; None where there is no such limit."""
        return None

    def token_counts(self, texts: list[str]) -> list[int] | None:
        """The tokens the model reads for each document (its prefix included), where its
        tokenizer can be had without loading the model; None where it cannot."""
        return None

    @property
    def device_label(self) -> str:
        """Where the model runs ("cpu", "cuda: <GPU name>", "remote"): latency compares only
        on the same device."""
        return "cpu"

    def timed_embed_documents(self, texts: list[str]) -> tuple[np.ndarray, float]:
        """Rows for `texts` and the milliseconds the model takes to embed them as one batch.

        A cache read must not pass for the model's latency, so the time is measured once per
        (model, device, batch), after a warm-up call, and remembered beside the vectors; a
        later run reads both. A batch not timed yet is encoded whole, even where some of its
        texts are cached, and counted as embedded.
        """
        from plugin.models.embedding_cache import text_key

        texts = [self.spec.document_prefix + t for t in texts]
        batch = text_key("\x00".join(texts))
        device = self.device_label
        if self.cache is not None:
            ms = self.cache.get_timing(self.fingerprint, device, batch)
            if ms is not None:
                return self._embed(texts), ms
        import numpy as np

        if not self._warmed_up:  # the first call pays for lazy initialisation, not the model
            self._encode(["warm-up"])
            self._warmed_up = True
        unique = list(dict.fromkeys(texts))
        began = time.perf_counter()
        encoded = np.asarray(self._encode(unique), dtype=np.float32)
        ms = (time.perf_counter() - began) * 1000.0
        usage = current_usage.get()
        if usage is not None:
            usage.texts_embedded += len(unique)
        if self.cache is not None:
            self.cache.put_many(self.fingerprint, unique, encoded)
            self.cache.put_timing(self.fingerprint, device, batch, ms)
        rows = dict(zip(unique, encoded, strict=True))
        return np.stack([rows[t] for t in texts]), ms

    def similarities(self, query: str, documents: list[str]) -> list[float]:
        """Cosine similarity of one query to each document (rows are unit length)."""
        query_vector = self.embed_queries([query])[0]
        return [float(x) for x in self.embed_documents(documents) @ query_vector]

    def index_documents(self, documents: list[str]) -> VectorIndex:
        """The documents embedded once (through the cache), ready to score any number of queries."""
        return VectorIndex(self, self.embed_documents(documents) if documents else None)

    def score_matrix(self, queries: list[str], documents: list[str]) -> np.ndarray:
        """Cosine similarities, one row per query and one column per document."""
        return self.index_documents(documents).score(queries)

    def close(self) -> None:
        pass


class VectorIndex:
    """An embedder's document vectors: `score(queries)` embeds the queries (with the query
    prefix) and returns their cosine similarities to every document, queries x documents."""

    def __init__(self, embedder: Embedder, matrix: np.ndarray | None) -> None:
        self.embedder = embedder
        self.matrix = matrix  # None for no documents

    def score(self, queries: list[str]) -> np.ndarray:
        import numpy as np

        if self.matrix is None or not queries:
            return np.zeros((len(queries), 0 if self.matrix is None else len(self.matrix)), dtype=np.float32)
        return self.embedder.embed_queries(queries) @ self.matrix.T


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    import numpy as np

    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)
