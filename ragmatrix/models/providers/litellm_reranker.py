"""`litellm: <provider>/<model>` with `kind: reranker`: a rerank API through litellm's `rerank`
(Cohere, Jina, Voyage, Together, ...), or any server speaking Cohere's `/v1/rerank` named by
`api_base` (`cohere/<model>`; vLLM, Infinity and Xinference serve one).

One request per batch of the entry's `batch_size` documents, asking for every document's score
(`top_n` of the request is the batch's size; the entry's `top_n` is a two-stage system's depth).
The wrapper (`ragmatrix.models.reranker.RerankModel`) sends the requests through the client
layer, as for every model on a server. What a request was billed comes back with its scores:
Cohere's `meta.billed_units` (searches, tokens) and the price litellm's cost map gives it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ragmatrix.cost.device import Device
from ragmatrix.models.client import EmptyAnswer, Failure
from ragmatrix.models.providers import provider
from ragmatrix.models.providers.litellm_chat import LitellmChat, LitellmSpec
from ragmatrix.models.reranker import Relevances, RerankModel, RerankProvider
from ragmatrix.models.spec import RerankerSpec, expand_env

if TYPE_CHECKING:
    from ragmatrix.models.protocols import Model
    from ragmatrix.models.spec import ModelBuilder


@provider("litellm_reranker", needs={"litellm": "litellm"})
class LitellmRerankerSpec(RerankerSpec, LitellmSpec):
    provider: Literal["litellm_reranker"] = "litellm_reranker"
    # An entry with `litellm:` and kind reranker is this provider's, not the chat provider's.
    precedence: ClassVar[int] = 1
    kinds: ClassVar[tuple[str, ...]] = ("reranker",)
    rank: ClassVar[int] = 10
    describe: ClassVar[str] = "a litellm reranker"

    @classmethod
    def claims(cls, entry: dict[str, Any]) -> bool:
        return super().claims(entry) and entry.get("kind") == "reranker"

    def scorer_fingerprint(self) -> dict[str, Any]:
        return {**LitellmSpec.fingerprint(self), "provider": "litellm_reranker"}

    def build(self, models: ModelBuilder) -> Model:
        return RerankModel.built(self, models, LitellmReranker(self))


class LitellmReranker(RerankProvider):
    """One `litellm.arerank` request per batch of documents."""

    def __init__(self, spec: LitellmSpec) -> None:
        self.spec = spec
        # The chat provider knows how to reach the model, where it is, and how to classify its
        # failures.
        self.connection = LitellmChat(spec)

    def arguments(self) -> dict[str, Any]:
        """The connection. A `cohere/` model's server is asked at `<server>/v1/rerank`, the
        route vLLM, Infinity, TEI and Xinference serve: its `api_base` may name the server, its
        `/v1` (as for chat) or the route itself. (Given the server alone, litellm would ask
        Cohere's newer `/v2/rerank`.)"""
        found = self.connection.connection()
        base = found.get("api_base")
        if base and expand_env(str(self.spec.litellm)).startswith("cohere/"):
            base = str(base).rstrip("/")
            if not base.endswith("/rerank"):
                base = base.removesuffix("/v1") + "/v1/rerank"
            found["api_base"] = base
        return found

    async def ascore(self, query: str, documents: list[str]) -> Relevances:
        response = await self.connection.litellm.arerank(
            model=expand_env(str(self.spec.litellm)),
            query=query,
            documents=documents,
            top_n=len(documents),
            return_documents=False,
            timeout=self.spec.timeout,
            max_retries=0,
            num_retries=0,
            **self.arguments(),
            **self.spec.params,
        )
        scores: dict[int, float] = {}
        for result in _field(response, "results") or []:
            index, score = _field(result, "index"), _field(result, "relevance_score")
            if isinstance(index, int) and 0 <= index < len(documents) and isinstance(score, int | float):
                scores[index] = float(score)
        if len(scores) != len(documents):  # a server fault that may pass: retried, never scored
            raise EmptyAnswer(f"scores for {len(scores)} of {len(documents)} documents")
        billed = _field(_field(response, "meta") or {}, "billed_units") or {}
        hidden = getattr(response, "_hidden_params", None) or {}
        usd = hidden.get("response_cost")
        return Relevances(
            [scores[i] for i in range(len(documents))],
            search_units=int(_field(billed, "search_units") or 0),
            tokens=int(_field(billed, "input_tokens") or _field(billed, "total_tokens") or 0),
            usd=float(usd) if isinstance(usd, int | float) else None,
        )

    def classify(self, error: BaseException) -> Failure:
        return self.connection.classify(error)

    def device(self) -> Device:
        return self.connection.device()


def _field(item: Any, name: str) -> Any:
    """litellm hands back dicts or objects, depending on the provider."""
    if item is None:
        return None
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)
