"""An embedding model as a benchmark test sees it.

A provider implements `EmbeddingProvider`: one batch of texts in, one vector per text out,
either where the model lives in this process (`embed`, blocking) or on a server (`aembed`,
awaited), and says where it works (`device`). `EmbeddingModel` is the one wrapper every
embedding provider is used through: the query and document prefixes, the embedding cache,
cosine similarity, usage and the cost figures; for a model on a server also the client layer
(`ragmatrix.models.client`: concurrency, timeouts, retries, the breaker and the throttle). A
model in this process is never retried: its failures are its own, not a network's.

Texts the cache cannot serve are encoded longest first (as sentence-transformers orders a
batch, so padding stays short) in blocks of `BLOCK` texts, and each block is written to the
cache as soon as it is encoded: a run killed in the middle of an index build embeds only the
rest when it runs again. A progress bar shows the rate and the time left for every index build
and every window of texts embedded ahead (whatever their size: a cold run must not sit silent),
and for other work from `PROGRESS_FROM` texts on.

A batch of several texts that the server does not answer in time is not sent again whole: it is
split in two, and the model's later batches are no larger, so a server that embeds one batch
at a time is given batches it can answer within the timeout.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from ragmatrix import cost
from ragmatrix.cost.device import Device, this_cpu
from ragmatrix.foundations.secrets import redact
from ragmatrix.models import aio
from ragmatrix.models.client import Client, Failure, LoadOnce, ModelError
from ragmatrix.models.progress import progress
from ragmatrix.models.spec import EmbedderSpec
from ragmatrix.models.usage import Usage, current_usage

# Texts per encode call and cache write: what a killed build can lose, and how often the bar moves
# (about every 4 s for MiniLM on two CPU cores); the encode call's own overhead stays well under
# 1% of its time.
BLOCK = 64
PROGRESS_FROM = 2 * BLOCK

if TYPE_CHECKING:
    import numpy as np

    from ragmatrix.models.embedding_cache import EmbeddingCache

# One vector per text, in order: a float array, or lists of floats as a server sends them.
Vectors = Any


class EmbeddingProvider(Protocol):
    """What an embedding provider implements: `embed` (a model in this process: any number of
    texts, batched as the model likes) or `aembed` (a model on a server: one request of at most
    the entry's `batch_size` texts), giving one vector per text in order (the wrapper normalises
    them). Everything else has a default: subclass it to take them.

    A provider on a server says so with its `device` (`ragmatrix.cost.device.remote(url)`):
    its calls then go through the client layer, and `classify` tells which failures may be
    retried. A local provider may also say what the cost figures and the retrieval families
    can use: its context limit, its token counts, its size, and a `load` that the clock waits
    for."""

    def device(self) -> Device:
        """Where the model works: this machine's CPU unless the provider says otherwise."""
        return this_cpu()

    def embed(self, texts: list[str]) -> Vectors:
        """The texts embedded in this process (a local model)."""
        raise ModelError(f"{type(self).__name__} implements neither embed nor aembed")

    async def aembed(self, texts: list[str]) -> Vectors:
        """One batch embedded on a server; by default, `embed`."""
        return self.embed(texts)

    def classify(self, error: BaseException) -> Failure:
        """Whether a failed call may be retried; by default, never."""
        return Failure(f"{type(error).__name__}: {error}".splitlines()[0][:300], retryable=False)

    def load(self) -> None:
        """Load the model (or find it on its server) before its first timed batch."""
        return None

    def context_limit(self) -> int | None:
        """Tokens the model reads before it truncates silently; None where there is no such limit."""
        return None

    def token_counts(self, texts: list[str]) -> list[int] | None:
        """The tokens the model reads for each text, where its tokenizer can be had cheaply."""
        return None

    def model_size(self) -> tuple[float | None, int | None]:
        """The model's files on disk (MB) and its parameter count, where it can tell."""
        return None, None

    def index(self, texts: list[str]) -> RowIndex | None:
        """The documents' unit-length rows kept the provider's own way (sparse rows, for a model
        whose rows are mostly zeros), or None: the wrapper keeps a dense matrix."""
        return None

    def close(self) -> None:
        """Release what the provider holds (a model it launched on a server)."""
        return None


class RowIndex(Protocol):
    """Documents' rows as a provider keeps them (`EmbeddingProvider.index`)."""

    def __len__(self) -> int: ...

    def scores(self, query: np.ndarray) -> np.ndarray:
        """The cosine similarity of one unit-length query row to every document."""
        ...


class EmbeddingModel:
    """An embedder as the `embedder` fixture gives it (an `Embedder`), on top of any
    `EmbeddingProvider`."""

    kind = "embedder"

    def __init__(self, spec: EmbedderSpec, provider: EmbeddingProvider, cache: EmbeddingCache | None = None) -> None:
        self.spec = spec
        self.id = spec.id
        self.provider = provider
        self.cache = cache
        self.client = Client(spec)
        self._fingerprint: str | None = None
        self._warmed_up = False
        # Texts embedded ahead of the items that need them (see `prefetch`): text -> (row,
        # read from the cache). Kept for the window, so that it works without a cache too.
        self._ahead: dict[str, tuple[np.ndarray, bool]] = {}
        self._ahead_used: set[str] = set()
        self._loaded = LoadOnce(self.id, provider.load)
        self._requests_answered = 0
        self.batch_size = spec.batch_size  # texts per request to a server; halved when one times out

    def _encode(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 rows for `texts`, from the provider: all at once in this process
        (the model batches them itself), or in requests of `batch_size` texts sent together
        through the client layer to a server. A failure is a `ModelError` naming the model."""
        import numpy as np

        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        if self.cost_device().local:
            return normalise_rows(_matrix(self._local(texts), len(texts)))
        size = self.batch_size
        batches = [texts[i : i + size] for i in range(0, len(texts), size)]
        rows = aio.run(self._remote(batches))
        return normalise_rows(np.concatenate([_matrix(r, len(b)) for r, b in zip(rows, batches, strict=True)]))

    def _local(self, batch: list[str]) -> Vectors:
        self._loaded()
        try:
            return self.provider.embed(batch)
        except ModelError:
            raise
        except Exception as error:  # a local model fails for good: no retry
            raise ModelError(redact(f"embedding failed: {type(error).__name__}: {error}".splitlines()[0])) from error

    async def _remote(self, batches: list[list[str]]) -> list[Vectors]:
        async def one(batch: list[str]) -> Vectors:
            async def send() -> Vectors:
                # the first request pays for the client's start: not a latency of the model's
                cold = self._requests_answered == 0
                vectors = await cost.timed_request(self, self.provider.aembed(batch), cold=cold)
                self._requests_answered += 1
                return vectors

            try:
                vectors = await self.client.call(send, self.provider.classify, resend_timeouts=len(batch) == 1)
            except ModelError as error:
                if not error.timed_out or len(batch) == 1:
                    raise
                half = len(batch) // 2
                self.batch_size = min(self.batch_size, half)
                first, second = await asyncio.gather(one(batch[:half]), one(batch[half:]))
                return [*first, *second]
            if len(vectors) != len(batch):
                raise ModelError(f"embedding response holds {len(vectors)} vectors for {len(batch)} texts")
            return vectors

        return list(await asyncio.gather(*(one(batch) for batch in batches)))

    def embed_documents(self, texts: list[str], unit: str = "text", progress_from: int = PROGRESS_FROM) -> np.ndarray:
        return self._embed([self.spec.document_prefix + t for t in texts], unit, progress_from)

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
            # a bar for every window's batch, as for an index build: a model's first load happens here
            encoded = self._encode_in_blocks(misses, "text", progress_from=1)
            self._ahead.update((t, (row, False)) for t, row in encoded.items())

    @property
    def fingerprint(self) -> str:
        """The md5 of the spec's output fingerprint: the cache's model key."""
        if self._fingerprint is None:
            from ragmatrix.foundations.keys import md5_of

            self._fingerprint = md5_of(self.spec.output_fingerprint())
        return self._fingerprint

    def _embed(self, texts: list[str], unit: str = "text", progress_from: int = PROGRESS_FROM) -> np.ndarray:
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
            vectors.update(self._encode_in_blocks(misses, unit, progress_from, usage))
        return np.stack([vectors[t] for t in texts]).astype(np.float32, copy=False)

    def _encode_in_blocks(
        self, texts: list[str], unit: str, progress_from: int = PROGRESS_FROM, usage: Usage | None = None
    ) -> dict[str, np.ndarray]:
        """`texts` encoded block by block, each block stored in the cache and counted in `usage`
        once it is encoded: a block that fails was not embedded."""
        ordered = sorted(texts, key=len, reverse=True)
        blocks = [ordered[i : i + BLOCK] for i in range(0, len(ordered), BLOCK)]
        done: dict[str, np.ndarray] = {}
        with progress(len(texts), f"{self.id}: embedding", unit) if len(texts) >= progress_from else _silent() as step:
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

    # -- what the cost meter reads (`ragmatrix.cost.meter.Measured`) ---------------------------

    def prepare_to_measure(self) -> None:
        """Load and warm up the model, so that its first timed encode is not its load."""
        self._loaded()
        if self.cost_device().local and not self._warmed_up:  # the first call pays for lazy set-up
            self._local(["warm-up"])
            self._warmed_up = True

    def cost_device(self) -> Device:
        return self.provider.device()

    def model_size(self) -> tuple[float | None, int | None]:
        return self.provider.model_size()

    # -- what the retrieval families read ----------------------------------------------------

    @property
    def context_limit(self) -> int | None:
        """Tokens the model reads before it truncates silently; None where there is no such limit."""
        return self.provider.context_limit()

    def token_counts(self, texts: list[str]) -> list[int] | None:
        """The tokens the model reads for each document (its prefix included), where its
        tokenizer can be had without loading the model; None where it cannot."""
        return self.provider.token_counts([self.spec.document_prefix + t for t in texts])

    @property
    def device_label(self) -> str:
        """Where the model runs ("cpu", "cuda: <GPU name>", "remote: <host>"): latency compares
        only on the same device."""
        return short_label(self.cost_device())

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

        self.prepare_to_measure()
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

    def encode_fresh(self, texts: list[str]) -> np.ndarray:
        """Unit-length rows for `texts` as given (no prefix added), from the model itself: no
        cache read or write, no usage or cost recorded. For a reranker that scores with this
        model and times the work as its own."""
        return self._encode(texts)

    def similarities(self, query: str, documents: list[str]) -> list[float]:
        """Cosine similarity of one query to each document (rows are unit length)."""
        query_vector = self.embed_queries([query])[0]
        return [float(x) for x in self.embed_documents(documents) @ query_vector]

    def index_documents(self, documents: list[str]) -> VectorIndex | ProviderIndex:
        """The documents embedded once (through the cache), ready to score any number of queries;
        kept the provider's own way where it has one (`EmbeddingProvider.index`). Either way the
        build shows a bar."""
        if documents and self.cost_device().local and _keeps_rows(self.provider):
            texts = [self.spec.document_prefix + t for t in documents]
            self._loaded()
            with cost.encoding(self, len(texts)), progress(len(texts), f"{self.id}: indexing", "chunk") as step:
                rows = self.provider.index(texts)
                step(len(texts))
            if rows is not None:
                usage = current_usage.get()
                if usage is not None:
                    usage.texts_embedded += len(texts)
                return ProviderIndex(self, rows)
        matrix = self.embed_documents(documents, unit="chunk", progress_from=1) if documents else None
        return VectorIndex(self, matrix)

    def query_row(self, query: str) -> np.ndarray:
        """One query's unit-length row (its prefix applied)."""
        return self._embed([self.spec.query_prefix + query])[0]

    def score_matrix(self, queries: list[str], documents: list[str]) -> np.ndarray:
        """Cosine similarities, one row per query and one column per document."""
        return self.index_documents(documents).score(queries)

    def close(self) -> None:
        self.provider.close()


@contextmanager
def _silent() -> Iterator[Callable[[int], object]]:
    yield lambda n: None


class VectorIndex:
    """An embedder's document vectors: `score(queries)` embeds the queries (with the query
    prefix) and returns their cosine similarities to every document, queries x documents."""

    def __init__(self, embedder: EmbeddingModel, matrix: np.ndarray | None) -> None:
        self.embedder = embedder
        self.matrix = matrix  # None for no documents

    def score(self, queries: list[str]) -> np.ndarray:
        import numpy as np

        if self.matrix is None or not queries:
            return np.zeros((len(queries), 0 if self.matrix is None else len(self.matrix)), dtype=np.float32)
        return self.embedder.embed_queries(queries) @ self.matrix.T


def _keeps_rows(provider: EmbeddingProvider) -> bool:
    """Does the provider keep documents' rows its own way (an `index` of its own)?"""
    return getattr(type(provider), "index", EmbeddingProvider.index) is not EmbeddingProvider.index


class ProviderIndex:
    """Documents kept the provider's own way (`EmbeddingProvider.index`): `score(queries)` embeds
    each query alone and scores it against them; that time, the query's whole cost, is the
    model's query latency."""

    def __init__(self, embedder: EmbeddingModel, rows: RowIndex) -> None:
        self.embedder = embedder
        self.rows = rows

    def score(self, queries: list[str]) -> np.ndarray:
        import numpy as np

        found = np.zeros((len(queries), len(self.rows)), dtype=np.float32)
        for position, query in enumerate(queries):
            began = time.perf_counter()
            found[position] = self.rows.scores(self.embedder.query_row(query))
            cost.query_latency(self.embedder, (time.perf_counter() - began) * 1000.0)
        return found


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    import numpy as np

    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def _matrix(vectors: Vectors, rows: int) -> np.ndarray:
    import numpy as np

    return np.asarray(vectors, dtype=np.float32).reshape(rows, -1)


def short_label(device: Device) -> str:
    """A device as rows and the embedding cache's batch timings name it: "cpu" for this
    machine's CPU (rows of every CPU share their timings' key), the full name otherwise."""
    return "cpu" if device.name.startswith("cpu:") else device.name
