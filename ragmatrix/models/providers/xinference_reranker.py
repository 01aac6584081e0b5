"""`xinference: <model name>` with `kind: reranker` and `endpoint:`: a rerank model on an
Xinference server (`bge-reranker-v2-m3`, ...), found running there or launched like its other
models, and terminated at the end only when this process launched it. Documents are scored
through the server's own Cohere-style `/v1/rerank`, by litellm's rerank route
(`ragmatrix.models.providers.litellm_reranker`), in requests of `batch_size` documents.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast

from ragmatrix.cost.device import Device, remote
from ragmatrix.models.client import Failure
from ragmatrix.models.providers import provider
from ragmatrix.models.providers.xinference import XinferenceServer, XinferenceSpec
from ragmatrix.models.reranker import Relevances, RerankModel, RerankProvider
from ragmatrix.models.spec import ModelSpec, RerankerSpec

if TYPE_CHECKING:
    from ragmatrix.models.protocols import Model
    from ragmatrix.models.providers.litellm_reranker import LitellmReranker, LitellmRerankerSpec
    from ragmatrix.models.spec import ModelBuilder


@provider("xinference_reranker", needs={"xinference_client": "xinference-client", "litellm": "litellm"})
class XinferenceRerankerSpec(RerankerSpec, XinferenceSpec):
    provider: Literal["xinference_reranker"] = "xinference_reranker"  # type: ignore[assignment]
    # An entry with `xinference:` and kind reranker is this provider's.
    precedence: ClassVar[int] = 1
    kinds: ClassVar[tuple[str, ...]] = ("reranker",)

    @classmethod
    def claims(cls, entry: dict[str, Any]) -> bool:
        return super().claims(entry) and entry.get("kind") == "reranker"

    def scorer_fingerprint(self) -> dict[str, Any]:
        return {**XinferenceSpec.fingerprint(self), "provider": "xinference_reranker"}

    def route(self, uid: str) -> ModelSpec:
        """The litellm reranker that reaches the running model `uid` at the server's
        `/v1/rerank`."""
        fields = {"id", "requires_env", "api_key_env", "concurrency", "timeout", "retries", "params", "batch_size"}
        fields |= {"breaker_after", "breaker_patience"}
        route = {name: getattr(self, name) for name in fields}
        return ModelSpec(
            **{**route, "kind": "reranker", "litellm": f"cohere/{uid}", "api_base": self.resolved_endpoint()}
        )

    def build(self, models: ModelBuilder) -> Model:
        return RerankModel.built(self, models, XinferenceReranker(XinferenceServer(self)))


class XinferenceReranker(RerankProvider):
    """Finds or launches its model on the first pair the rerank cache cannot serve, then scores
    batches through litellm's rerank route to it."""

    def __init__(self, server: XinferenceServer) -> None:
        self.server = server
        self._route: LitellmReranker | None = None

    @property
    def route(self) -> LitellmReranker:
        if self._route is None:
            from ragmatrix.models.providers.litellm_reranker import LitellmReranker

            self._route = LitellmReranker(cast("LitellmRerankerSpec", self.server.spec.route(self.server.model_uid())))
        return self._route

    def load(self) -> None:
        self.route  # noqa: B018 - found or launched before the clock starts: a launch is not a reranking

    async def ascore(self, query: str, documents: list[str]) -> Relevances:
        return await self.route.ascore(query, documents)

    def classify(self, error: BaseException) -> Failure:
        return self.route.classify(error)

    def device(self) -> Device:
        return remote(self.server.endpoint)

    def close(self) -> None:
        self.server.close()
