"""`http_embedder: <base URL>`: an embedder on a server of your own, which answers
`POST <base URL>/embed` with `{"texts": [...]}` by `{"embeddings": [[...], ...]}`.

A pytest plugin: `PYTHONPATH=docs/examples pytest benchmark -p http_embedder`, with an entry
such as this in benchmark/models.yaml:

    - id: my-embedder
      kind: embedder
      http_embedder: http://127.0.0.1:8080
      model: my-embedder-v1   # what the server serves: the stored results are keyed by it
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from ragmatrix.providers import (
    BadResponse,
    Device,
    EmbedderSpec,
    EmbeddingModel,
    EmbeddingProvider,
    Failure,
    HttpSession,
    ModelBuilder,
    classify_http,
    provider,
    remote,
)


@provider("http_embedder", needs={"httptools": "httptools"})
class HttpEmbedderSpec(EmbedderSpec):
    """The fields of the entry: the shared ones (`concurrency`, `timeout`, `retries`,
    `breaker_after`, `batch_size`, prefixes, ...) and this provider's own."""

    provider: Literal["http_embedder"] = "http_embedder"
    key: ClassVar[str | None] = "http_embedder"  # an entry with `http_embedder:` is this provider's
    kinds: ClassVar[tuple[str, ...]] = ("embedder",)
    describe: ClassVar[str] = "an http_embedder URL"
    http_embedder: str  # the server's base URL; "${VAR}" reads it from the environment
    model: str = ""  # the model the server serves

    def fingerprint(self) -> dict[str, Any]:
        # What changes the vectors: the model and what it is given. A server moved elsewhere
        # serves the same vectors, so the URL names the model only when `model` is not given.
        return {
            "provider": "http_embedder",
            "model": self.model or self.http_embedder,
            "query_prefix": self.query_prefix,
            "document_prefix": self.document_prefix,
        }

    def build(self, models: ModelBuilder) -> EmbeddingModel:
        # The wrapper adds the prefixes, the embedding cache, the client layer and the costs.
        return EmbeddingModel(self, HttpEmbedder(self), models.embedding_cache())


class HttpEmbedder(EmbeddingProvider):
    """One POST per batch of at most `batch_size` texts. The wrapper sends the batches through
    the client layer: at most `concurrency` at once, each bounded by `timeout`, retried, paced
    after a 429, and given up by the breaker when the server stops answering."""

    def __init__(self, spec: HttpEmbedderSpec) -> None:
        self.url = spec.http_embedder.rstrip("/") + "/embed"
        self.http = HttpSession(self.url, connections=spec.concurrency)

    async def aembed(self, texts: list[str]) -> list[list[float]]:
        answer = await self.http.post_json(self.url, {"texts": texts})
        if not isinstance(answer, dict) or not isinstance(answer.get("embeddings"), list):
            raise BadResponse(f"no embeddings in the answer: {str(answer)[:200]}")
        return answer["embeddings"]

    def classify(self, error: BaseException) -> Failure:
        # 429, 408, 5xx and dropped connections are retried; other statuses are not
        return classify_http(error)

    def device(self) -> Device:
        return remote(self.url)  # "remote: <host>": the server's speed, not this machine's
