"""`litellm: <provider>/<model>` with `kind: embedder`: embeddings from any API litellm
supports, or from an OpenAI-compatible server named by `api_base`.

The provider sends one request per batch of the model's `batch_size` texts; the wrapper
(`ragmatrix.models.embedder.EmbeddingModel`) sends them through the client layer, as for every
model on a server (concurrency limit, timeouts, bounded retries honouring Retry-After, the
breaker and the throttle).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ragmatrix.cost.device import Device
from ragmatrix.models.client import Failure, longest_wait
from ragmatrix.models.embedder import EmbeddingModel, EmbeddingProvider
from ragmatrix.models.providers import provider
from ragmatrix.models.providers.litellm_chat import LitellmChat, LitellmSpec
from ragmatrix.models.spec import EmbedderSpec, expand_env

if TYPE_CHECKING:
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
        return EmbeddingModel(self, LitellmEmbedding(self), models.embedding_cache())


class LitellmEmbedding(EmbeddingProvider):
    """One `litellm.aembedding` request per batch."""

    def __init__(self, spec: LitellmSpec) -> None:
        self.spec = spec
        # The chat provider knows how to reach the model, where it is, and how to classify its
        # failures.
        self.connection = LitellmChat(spec)

    async def aembed(self, texts: list[str]) -> list[list[float]]:
        response = await self.connection.litellm.aembedding(
            model=expand_env(str(self.spec.litellm)),
            input=texts,
            timeout=longest_wait(self.spec.timeout, self.spec.concurrency),  # the client layer bounds it
            max_retries=0,
            num_retries=0,
            **self.connection.connection(),
        )
        self.connection.served = getattr(response, "model", None) or self.connection.served
        data = sorted(response.data or [], key=lambda item: _field(item, "index"))
        return [list(_field(item, "embedding")) for item in data]

    def classify(self, error: BaseException) -> Failure:
        return self.connection.classify(error)

    def device(self) -> Device:
        return self.connection.device()


def _field(item: Any, name: str) -> Any:
    """litellm hands back dicts or objects, depending on the provider."""
    return item[name] if isinstance(item, dict) else getattr(item, name)
