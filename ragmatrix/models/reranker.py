"""A reranker as a benchmark test sees it: `reranker.rerank(query, documents)` gives one relevance
per document, in order (higher is more relevant).

A provider implements `RerankProvider`: score one query against a list of documents, either where
the model lives in this process (`score`, blocking) or on a server (`ascore`, awaited: one request
of at most the entry's `batch_size` documents), and say where it works (`device`). `RerankModel`
is the one wrapper every reranking provider is used through: the persistent cache of (model,
query, document) scores (`ragmatrix.models.rerank_cache`), usage, the cost figures (documents
scored per second, latency per query, requests, and for APIs the searches or tokens billed and
their price), and for a model on a server the client layer (`ragmatrix.models.client`:
concurrency, timeouts, retries, the breaker and the throttle). A model in this process is never
retried: its failures are its own, not a network's. A provider that asks another model of
models.yaml (an LLM read pointwise) says `delegates = True`: that model's own wrapper makes its
calls robust, so they are not retried twice.

A document the model gave no valid relevance for (an LLM whose answer does not parse) is None,
never a number: the families count such a ranking invalid, and it is never cached.

A reranker entry that names `first_stage` is a two-stage retrieval system: `first_stage` is that
model, built, and `top_n` the depth it reranks (see `ragmatrix.models.two_stage`).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from ragmatrix import cost
from ragmatrix.cost.device import Device, this_cpu
from ragmatrix.cost.price import Price, SearchPrice, price_of
from ragmatrix.foundations.secrets import redact
from ragmatrix.models import aio
from ragmatrix.models.client import Client, Failure, LoadOnce, ModelError
from ragmatrix.models.usage import current_usage

if TYPE_CHECKING:
    from ragmatrix.models.protocols import Retriever
    from ragmatrix.models.rerank_cache import RerankCache
    from ragmatrix.models.spec import ModelBuilder, RerankerSpec


@dataclass(frozen=True)
class Relevances:
    """What a provider may return instead of a bare list of scores: the scores, and what the
    call was billed and whether it was timed work."""

    scores: list[float | None]
    search_units: int = 0  # searches the API billed (Cohere's `billed_units.search_units`)
    tokens: int = 0  # tokens the API billed
    usd: float | None = None  # what the client priced the call at, where it did
    replayed: bool = False  # answered (in part) from another model's cache: no latency of its own


Scores = list[float | None] | list[float] | Relevances


class RerankProvider(Protocol):
    """What a reranking provider implements: `score` (a model in this process) or `ascore` (a
    model on a server: one request of at most the entry's `batch_size` documents), giving one
    relevance per document, in order, higher meaning more relevant; None for a document the
    model gave no valid relevance. Everything else has a default: subclass it to take them.

    A provider on a server says so with its `device` (`ragmatrix.cost.device.remote(url)`): its
    requests then go through the client layer, and `classify` tells which failures may be
    retried."""

    # A provider that asks another model's wrapper (which owns its own client layer) sets this:
    # its blocking `score` is then called as is, never retried or timed out a second time.
    delegates: bool = False

    def device(self) -> Device:
        """Where the model works: this machine's CPU unless the provider says otherwise."""
        return this_cpu()

    def score(self, query: str, documents: list[str]) -> Scores:
        """The documents scored for the query in this process (a local model)."""
        raise ModelError(f"{type(self).__name__} implements neither score nor ascore")

    async def ascore(self, query: str, documents: list[str]) -> Scores:
        """One request's documents scored on a server; by default, `score`."""
        return self.score(query, documents)

    def classify(self, error: BaseException) -> Failure:
        """Whether a failed call may be retried; by default, never."""
        return Failure(f"{type(error).__name__}: {error}".splitlines()[0][:300], retryable=False)

    def load(self) -> None:
        """Load the model (or find it on its server) before its first timed call."""
        return None

    def model_size(self) -> tuple[float | None, int | None]:
        """The model's files on disk (MB) and its parameter count, where it can tell."""
        return None, None

    def close(self) -> None:
        """Release what the provider holds (a model it launched on a server)."""
        return None


def as_relevances(value: Scores, documents: int) -> Relevances:
    """A provider's answer as `Relevances`, checked: one finite float or None per document."""
    import math

    found = value if isinstance(value, Relevances) else Relevances(list(value))
    if len(found.scores) != documents:
        raise ModelError(f"rerank answer holds {len(found.scores)} scores for {documents} documents")
    scores: list[float | None] = []
    for score in found.scores:
        if score is None:
            scores.append(None)
            continue
        number = float(score)
        if not math.isfinite(number):
            raise ModelError(f"rerank answer holds a score that is not a finite number ({number})")
        scores.append(number)
    return Relevances(scores, found.search_units, found.tokens, found.usd, found.replayed)


def _as_stored(score: float) -> float:
    """A score as the cache keeps it (float32): a fresh run and a cached one rank alike."""
    import numpy as np

    return float(np.float32(score))


class RerankModel:
    """A reranker as the `reranker` fixture gives it (a `Reranker`), on top of any
    `RerankProvider`."""

    kind = "reranker"

    def __init__(
        self,
        spec: RerankerSpec,
        provider: RerankProvider,
        cache: RerankCache | None = None,
        first_stage: Retriever | None = None,
    ) -> None:
        self.spec = spec
        self.id = spec.id
        self.provider = provider
        self.cache = cache
        self.client = Client(spec)
        self.first_stage = first_stage
        self.top_n = spec.top_n
        self._fingerprint: str | None = None
        self._loaded = LoadOnce(self.id, provider.load)
        self._warmed_up = False
        self._requests_answered = 0

    @classmethod
    def built(cls, spec: RerankerSpec, models: ModelBuilder, provider: RerankProvider) -> RerankModel:
        """A reranker entry's model: `provider` in the wrapper, with the run's rerank cache and
        the entry's first stage built (what a spec's `build` returns)."""
        stage = spec.first_stage_spec
        first = models.build(stage) if stage is not None else None
        return cls(spec, provider, models.rerank_cache(), cast("Retriever | None", first))

    @property
    def fingerprint(self) -> str:
        """The md5 of the spec's output fingerprint: the cache's model key."""
        if self._fingerprint is None:
            from ragmatrix.foundations.keys import md5_of

            self._fingerprint = md5_of(self.spec.output_fingerprint())
        return self._fingerprint

    # -- scoring -----------------------------------------------------------------------------

    def rerank(self, query: str, documents: list[str]) -> list[float | None]:
        """One relevance per document, in order: cached ones read, the others scored."""
        return self.rerank_many([(query, documents)])[0]

    def rerank_many(self, requests: list[tuple[str, list[str]]]) -> list[list[float | None]]:
        """`rerank` of many queries: a model on a server is asked for all of them at once (its
        concurrency bounds what is in flight), a local one query after query."""
        results: list[list[float | None]] = []
        missing: list[tuple[int, str, list[str]]] = []
        for index, (query, documents) in enumerate(requests):
            found = self._cached(query, documents)
            results.append(found)
            wanted = list(dict.fromkeys(d for d, s in zip(documents, found, strict=True) if s is None))
            if wanted:
                missing.append((index, query, wanted))
        if not missing:
            return results
        if self._local():
            scored = [self._score_local(query, wanted) for _, query, wanted in missing]
        else:
            self._loaded()  # found or launched on its server here, never on the loop

            async def every() -> list[dict[str, float | None]]:
                return list(await asyncio.gather(*(self._score_remote(q, w) for _, q, w in missing)))

            scored = aio.run(every())
        for (index, _, _), scores in zip(missing, scored, strict=True):
            query, documents = requests[index]
            results[index] = [
                s if s is not None else scores.get(d) for d, s in zip(documents, results[index], strict=True)
            ]
        return results

    def _local(self) -> bool:
        return self.cost_device().local or self.provider.delegates

    def _cached(self, query: str, documents: list[str]) -> list[float | None]:
        if self.cache is None or not documents:
            return [None] * len(documents)
        found = self.cache.get_many(self.fingerprint, query, documents)
        hits = [d for d, s in zip(documents, found, strict=True) if s is not None]
        cost.served_from_cache(self, len(hits))
        usage = current_usage.get()
        if usage is not None and hits:
            usage.rerank_cache_hits += len(hits)
        return found

    def _score_local(self, query: str, documents: list[str]) -> dict[str, float | None]:
        """The documents scored in this process (or by the model a delegating provider asks),
        timed as the model's own work unless another model's cache answered."""
        self._loaded()
        with cost.encoding(self, len(documents)):  # loads and warms up first, outside its clock
            began = time.perf_counter()
            try:
                answer = self.provider.score(query, documents)
            except ModelError:
                raise
            except Exception as error:  # a local model fails for good: no retry
                message = f"reranking failed: {type(error).__name__}: {error}".splitlines()[0]
                raise ModelError(redact(message)) from error
            ms = (time.perf_counter() - began) * 1000.0
        relevances = as_relevances(answer, len(documents))
        if not relevances.replayed:
            cost.query_latency(self, ms)
        return self._keep(query, documents, relevances)

    async def _score_remote(self, query: str, documents: list[str]) -> dict[str, float | None]:
        """The documents scored on a server, in requests of at most `batch_size` documents sent
        together through the client layer."""
        size = self.spec.batch_size
        batches = [documents[i : i + size] for i in range(0, len(documents), size)]

        async def one(batch: list[str]) -> Relevances:
            async def send() -> Scores:
                cold = self._requests_answered == 0  # pays for the client's start: no latency of the model's
                answer = await cost.timed_request(
                    self, self.provider.ascore(query, batch), cold=cold, usage=_billed_tokens
                )
                self._requests_answered += 1
                return answer

            relevances = as_relevances(await self.client.call(send, self.provider.classify), len(batch))
            self._bill(relevances)
            return relevances

        with cost.encoding(self, len(documents)):
            began = time.perf_counter()
            answers = list(await asyncio.gather(*(one(batch) for batch in batches)))
            ms = (time.perf_counter() - began) * 1000.0
        if self._requests_answered > len(batches):  # not the first, cold query
            cost.query_latency(self, ms)
        scores: list[float | None] = [s for answer in answers for s in answer.scores]
        return self._keep(query, documents, Relevances(scores))

    def _bill(self, relevances: Relevances) -> None:
        """One request in the item's usage: its call, the tokens and searches billed, and their
        price (`price:` of the entry, else the client's own, else unknown)."""
        usage = current_usage.get()
        if usage is None:
            return
        price, _ = price_of(self.spec)
        usd = relevances.usd
        if isinstance(price, SearchPrice):
            usd = price.usd(relevances.search_units)
        elif isinstance(price, Price):
            usd = price.usd(relevances.tokens, 0)
        usage.add({"prompt_tokens": relevances.tokens}, usd, cached=False)
        usage.search_units += relevances.search_units

    def _keep(self, query: str, documents: list[str], relevances: Relevances) -> dict[str, float | None]:
        """The scores by document, valid ones as the cache keeps them and stored there."""
        scores = {d: None if s is None else _as_stored(s) for d, s in zip(documents, relevances.scores, strict=True)}
        valid = [d for d, s in scores.items() if s is not None]
        if self.cache is not None and valid:
            self.cache.put_many(self.fingerprint, query, valid, [float(scores[d] or 0.0) for d in valid])
        usage = current_usage.get()
        if usage is not None:
            usage.documents_reranked += len(documents)
        return scores

    # -- what the cost meter reads (`ragmatrix.cost.meter.Measured`) ---------------------------

    def prepare_to_measure(self) -> None:
        """Load and warm up the model (a delegating provider: the model it asks), so that its
        first timed call is not its load."""
        self._loaded()
        if self.provider.delegates or not self.cost_device().local:
            return
        if not self._warmed_up:  # the first call pays for lazy set-up
            self._warmed_up = True
            self.provider.score("warm-up", ["warm-up"])

    def cost_device(self) -> Device:
        return self.provider.device()

    def model_size(self) -> tuple[float | None, int | None]:
        return self.provider.model_size()

    def close(self) -> None:
        self.provider.close()


def _billed_tokens(answer: Any) -> dict[str, int]:
    """The tokens a request was billed, for the request's cost record."""
    tokens = answer.tokens if isinstance(answer, Relevances) else 0
    return {"prompt_tokens": tokens, "completion_tokens": 0}
