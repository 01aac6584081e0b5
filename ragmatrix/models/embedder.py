"""An embedding model as a benchmark test sees it.

Backends implement `_encode(texts)` (a batch in, unit-length float32 rows out); this class
adds the query and document prefixes, the embedding cache and cosine similarity.

Texts the cache cannot serve are encoded longest first (as sentence-transformers orders a
batch, so padding stays short) in blocks of `BLOCK` texts, and each block is written to the
cache as soon as it is encoded: a run killed in the middle of an index build embeds only the
rest when it runs again. From `PROGRESS_FROM` texts on, a progress bar shows the rate and the
time left.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ragmatrix import cost
from ragmatrix.models.progress import progress
from ragmatrix.models.spec import TextSpec
from ragmatrix.models.usage import Usage, current_usage

# Texts per encode call and cache write: what a killed build can lose, and small enough that the
# encode call's own overhead stays well under 1% of its time.
BLOCK = 256
PROGRESS_FROM = 2 * BLOCK

if TYPE_CHECKING:
    import numpy as np

    from ragmatrix.models.embedding_cache import EmbeddingCache


class Embedder:
    kind = "embedder"

    def __init__(self, spec: TextSpec, cache: EmbeddingCache | None = None) -> None:
        self.spec = spec
        self.id = spec.id
        self.cache = cache
        self._fingerprint: str | None = None
        self._warmed_up = False
        # Texts embedded ahead of the items that need them (see `prefetch`): text -> (row,
        # read from the cache). Kept for the window, so that it works without a cache too.
        self._ahead: dict[str, tuple[np.ndarray, bool]] = {}
        self._ahead_used: set[str] = set()

    def _encode(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def embed_documents(self, texts: list[str], unit: str = "text") -> np.ndarray:
        return self._embed([self.spec.document_prefix + t for t in texts], unit)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        queries = [self.spec.query_prefix + t for t in texts]
        rows = self._embed(queries)
        cost.time_queries(self, queries, self._encode)  # a few queries alone, for the latency of one
        return rows

    def prefetch(self, queries: list[str], documents: list[str]) -> None:
        """Embed the texts of a window of items now, in one batch (the backend splits it by
        `batch_size`): the items then find their rows here instead of embedding a few texts
        each. Usage is counted when an item takes a row, as if it had embedded it.

        The rows of the previous window are dropped (its items have run), except those this
        window needs again: what is held ahead stays one window's worth, however long the run."""
        texts = [self.spec.query_prefix + q for q in queries] + [self.spec.document_prefix + d for d in documents]
        wanted = dict.fromkeys(texts)
        self._ahead = {t: row for t, row in self._ahead.items() if t in wanted}
        unique = [t for t in wanted if t not in self._ahead]
        if not unique:
            return
        if self.cache is not None:
            for text, vector in zip(unique, self.cache.get_many(self.fingerprint, unique), strict=True):
                if vector is not None:
                    self._ahead[text] = (vector, True)
        misses = [t for t in unique if t not in self._ahead]
        if misses:
            self._ahead.update((t, (row, False)) for t, row in self._encode_in_blocks(misses, "text").items())

    @property
    def fingerprint(self) -> str:
        """The md5 of the spec's output fingerprint: the cache's model key."""
        if self._fingerprint is None:
            from ragmatrix.foundations.keys import md5_of

            self._fingerprint = md5_of(self.spec.output_fingerprint())
        return self._fingerprint

    def _embed(self, texts: list[str], unit: str = "text") -> np.ndarray:
        """Rows for `texts` (prefixes applied) in order: cached ones read, the distinct misses
        encoded in blocks, each block stored as it is done."""
        import numpy as np

        if not texts:
            return np.asarray(self._encode([]), dtype=np.float32)
        unique = list(dict.fromkeys(texts))
        vectors: dict[str, np.ndarray] = {}
        # Usage counts each text the way the item would have, had nothing been embedded ahead:
        # embedded by this run (first taken), shared within this run, or from an earlier run.
        embedded = shared = 0
        from_cache: list[str] = []
        for text in unique:
            if text in self._ahead:
                vectors[text], cached = self._ahead[text]
                if cached:
                    from_cache.append(text)
                elif text in self._ahead_used:
                    shared += 1
                else:
                    embedded += 1
                self._ahead_used.add(text)
        looked_up = [t for t in unique if t not in vectors]
        if self.cache is not None and looked_up:
            for text, vector in zip(looked_up, self.cache.get_many(self.fingerprint, looked_up), strict=True):
                if vector is not None:
                    vectors[text] = vector
                    from_cache.append(text)
        misses = [t for t in unique if t not in vectors]
        cost.served_from_cache(self, len(from_cache))
        usage = current_usage.get()
        if usage is not None:
            written_here = self.cache.written_here(self.fingerprint, from_cache) if self.cache is not None else 0
            usage.texts_embedded += embedded  # the misses count as their blocks are encoded
            usage.embedding_shared += shared + written_here
            usage.embedding_cache_hits += len(from_cache) - written_here
        if misses:
            vectors.update(self._encode_in_blocks(misses, unit, usage))
        return np.stack([vectors[t] for t in texts]).astype(np.float32, copy=False)

    def _encode_in_blocks(self, texts: list[str], unit: str, usage: Usage | None = None) -> dict[str, np.ndarray]:
        """`texts` encoded block by block, each block stored in the cache and counted in `usage`
        once it is encoded: a block that fails was not embedded."""
        ordered = sorted(texts, key=len, reverse=True)
        blocks = [ordered[i : i + BLOCK] for i in range(0, len(ordered), BLOCK)]
        done: dict[str, np.ndarray] = {}
        with progress(len(texts), f"{self.id}: embedding", unit) if len(texts) >= PROGRESS_FROM else _silent() as step:
            for block in blocks:
                encoded = self._measured_encode(block)
                if usage is not None:
                    usage.texts_embedded += len(block)
                if self.cache is not None:
                    self.cache.put_many(self.fingerprint, block, encoded)
                done.update(zip(block, encoded, strict=True))
                step(len(block))
        return done

    def _measured_encode(self, texts: list[str]) -> np.ndarray:
        """`_encode`, timed as the model's own work for the session's cost figures."""
        import numpy as np

        with cost.encoding(self, len(texts)):
            return np.asarray(self._encode(texts), dtype=np.float32)

    # -- what the cost figures need (see ragmatrix.cost.meter) ----------------------------------

    def prepare_to_measure(self) -> None:
        """Load and warm up the model, so that its first timed encode is not its load."""

    @property
    def cost_device(self) -> str:
        """The device's full name for the cost figures: `cpu: <CPU model>`, `cuda: <GPU>`, `remote`."""
        from ragmatrix.cost.device import describe

        return describe(self.device_label)

    @property
    def cuda_device(self) -> str | None:
        """The torch CUDA device the model is on ("cuda:0"), for its peak GPU memory; None off CUDA."""
        return None

    def model_size(self) -> tuple[float | None, int | None]:
        """The model's files on disk (MB) and its parameter count, where the backend can tell."""
        return None, None

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
        from ragmatrix.models.embedding_cache import text_key

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
        encoded = self._measured_encode(unique)
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
        return VectorIndex(self, self.embed_documents(documents, unit="chunk") if documents else None)

    def score_matrix(self, queries: list[str], documents: list[str]) -> np.ndarray:
        """Cosine similarities, one row per query and one column per document."""
        return self.index_documents(documents).score(queries)

    def close(self) -> None:
        pass


@contextmanager
def _silent() -> Iterator[Callable[[int], object]]:
    yield lambda n: None


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
