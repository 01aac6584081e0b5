"""`litellm: <provider>/<model>` with `kind: embedder`: embeddings from any API litellm
supports, or from an OpenAI-compatible server named by `api_base`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from plugin.models.providers import provider
from plugin.models.providers.litellm_chat import LitellmSpec
from plugin.models.spec import EmbedderSpec

if TYPE_CHECKING:
    from plugin.models.protocols import Model
    from plugin.models.registry import Registry


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

    def build(self, models: Registry) -> Model:
        from plugin.models.litellm_embedder import LitellmEmbedder

        return LitellmEmbedder(self, models.embedding_cache())
