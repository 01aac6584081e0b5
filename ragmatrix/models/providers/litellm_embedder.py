"""`litellm: <provider>/<model>` with `kind: embedder`: embeddings from any API litellm
supports, or from an OpenAI-compatible server named by `api_base`.

Calls go through the same client layer as chat (concurrency limit, timeouts, bounded retries
honouring Retry-After), in batches of the model's `batch_size`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ragmatrix import cost
from ragmatrix.models import aio
from ragmatrix.models.client import Breaker, ModelError, RetryPolicy, Throttle, call
from ragmatrix.models.embedder import Embedder, normalise_rows
from ragmatrix.models.providers import provider
from ragmatrix.models.providers.litellm_chat import LitellmChat, LitellmSpec
from ragmatrix.models.spec import EmbedderSpec, expand_env

if TYPE_CHECKING:
    import numpy as np

    from ragmatrix.models.embedding_cache import EmbeddingCache
    from ragmatrix.models.protocols import Model
    from ragmatrix.models.spec import ModelBuilder


@provider("litellm_embedder", needs={"litellm": "litellm"})
class LitellmEmbedderSpec(EmbedderSpec, LitellmSpec):
    provider: Literal["litellm_embedder"] = "litellm_embedder"
    kinds: ClassVar[tuple[str, ...]] = ("embedder",)
    key: ClassVar[str | None] = "litellm"
    rank: ClassVar[int] = 10
    describe: ClassVar[str] = "a litellm embedder"

    @classmethod
    def claims(cls, entry: dict[str, Any]) -> bool:
        return super().claims(entry) and entry.get("kind") == "embedder"

    def fingerprint(self) -> dict[str, Any]:
        # prefixes change what an embedder is given to embed
        return {**super().fingerprint(), "query_prefix": self.query_prefix, "document_prefix": self.document_prefix}

    def build(self, models: ModelBuilder) -> Model:
        return LitellmEmbedder(self, models.embedding_cache())


class LitellmEmbedder(Embedder):
    spec: LitellmEmbedderSpec

    def __init__(self, spec: LitellmEmbedderSpec, cache: EmbeddingCache | None = None) -> None:
        super().__init__(spec, cache)
        # The chat provider knows how to reach the model and how to classify its failures.
        self.connection = LitellmChat(spec)
        self.policy = RetryPolicy(retries=spec.retries)
        self.breaker = Breaker(spec.breaker_after, patience=spec.patience)
        self.throttle = Throttle(spec.concurrency)
        self._semaphore: asyncio.Semaphore | None = None
        self._answered = 0  # requests answered: the first ones pay for the client's start

    async def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        litellm = self.connection.litellm
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.spec.concurrency)

        async def send() -> Any:
            request = litellm.aembedding(
                model=expand_env(str(self.spec.litellm)),
                input=texts,
                timeout=self.spec.timeout,
                max_retries=0,
                num_retries=0,
                **self.connection.connection(),
            )
            answer = await cost.timed_request(self.id, request, cold=self._answered == 0)
            self._answered += 1
            return answer

        response = await call(
            send,
            semaphore=self._semaphore,
            timeout=self.spec.timeout,
            policy=self.policy,
            classify=self.connection.classify,
            breaker=self.breaker,
            throttle=self.throttle,
        )
        data = sorted(response.data or [], key=lambda item: _field(item, "index"))
        if len(data) != len(texts):
            raise ModelError(f"embedding response holds {len(data)} vectors for {len(texts)} texts")
        return [list(_field(item, "embedding")) for item in data]

    @property
    def device_label(self) -> str:
        return "remote"

    def _encode(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        size = self.spec.batch_size
        batches = [texts[i : i + size] for i in range(0, len(texts), size)]

        async def gather() -> list[list[list[float]]]:
            return list(await asyncio.gather(*(self._embed_batch(batch) for batch in batches)))

        rows = [row for batch in aio.run(gather()) for row in batch]
        return normalise_rows(np.asarray(rows, dtype=np.float32).reshape(len(texts), -1))


def _field(item: Any, name: str) -> Any:
    """litellm hands back dicts or objects, depending on the provider."""
    return item[name] if isinstance(item, dict) else getattr(item, name)
