"""What a benchmark test gets from each model fixture, whatever the provider.

`ChatModel`, `PrefetchingChatModel`, `Retriever`, `Reranker` and `JudgeEnsemble` are runtime-checkable: a family may ask
`isinstance(model, ChatModel)`. `Embedder` is not, because Python 3.11 evaluates properties
(`context_limit`, `device_label`) to check them, and those may load a model; test embedders by
`model.kind == "embedder"`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np


Messages = list[dict[str, str]]


@runtime_checkable
class Model(Protocol):
    """Anything a provider builds: its id in models.yaml and its kind. A model that holds
    something (a server's model, a client) also offers `close()`, called at session end."""

    id: str
    kind: str


@runtime_checkable
class ChatModel(Model, Protocol):
    """An LLM (fixture `llm`): answer texts, cached, retried and accounted for per item."""

    async def achat(self, messages: Messages, sample: int | None = None) -> str: ...

    def chat(self, messages: Messages) -> str: ...

    def chat_many(self, conversations: list[Messages]) -> list[str]: ...


@runtime_checkable
class PrefetchingChatModel(ChatModel, Protocol):
    """An LLM whose answers the scheduler can ask ahead of the items (every LLM built on
    `ragmatrix.models.chat.LLM`): it sends a family's first-round requests (`prefetch`),
    and an item's `achat` with the same messages and sample then takes that answer instead of
    asking again. After the item, `left_unused` says which answers sent ahead it never took. An
    LLM without these is asked by its items alone, one request at a time."""

    def prefetch(self, messages: Messages, sample: int) -> Awaitable[object]:
        """Ask now, on the running loop, for a later `achat(messages, sample)`."""
        ...

    def left_unused(self, messages: Messages, sample: int) -> bool:
        """Whether the answer sent ahead for these messages and sample came back and was never
        taken; said once per request (the next call for it says False)."""
        ...


class DocumentIndex(Protocol):
    """Documents prepared once; `score(queries)` gives queries x documents."""

    def score(self, queries: list[str]) -> np.ndarray: ...


@runtime_checkable
class Retriever(Model, Protocol):
    """A model that ranks documents for a query (fixture `retriever`): an embedder, or a
    lexical retriever such as BM25 that has no vectors."""

    def similarities(self, query: str, documents: list[str]) -> list[float]: ...

    def score_matrix(self, queries: list[str], documents: list[str]) -> np.ndarray: ...

    def index_documents(self, documents: list[str]) -> DocumentIndex: ...


class Embedder(Retriever, Protocol):
    """An embedding model (fixture `embedder`): unit-length float32 rows, through the cache.

    The scheduler embeds a window of items' texts ahead in one batch (`prefetch`); the items
    then take their rows from there."""

    def prefetch(self, queries: list[str], documents: list[str]) -> None: ...

    def embed_documents(self, texts: list[str]) -> np.ndarray: ...

    def embed_queries(self, texts: list[str]) -> np.ndarray: ...

    def timed_embed_documents(self, texts: list[str]) -> tuple[np.ndarray, float]: ...

    def token_counts(self, texts: list[str]) -> list[int] | None: ...

    @property
    def context_limit(self) -> int | None: ...

    @property
    def device_label(self) -> str: ...


@runtime_checkable
class Reranker(Model, Protocol):
    """A model that scores one query against a list of documents (fixture `reranker`, kind
    reranker): one relevance per document, in order, higher meaning more relevant; None for a
    document the model gave no valid relevance (an LLM's answer that does not parse). One with a
    `first_stage` (an embedder or retriever) and `top_n` is a two-stage retrieval system too
    (fixture `retriever`): see `ragmatrix.models.two_stage`."""

    first_stage: Retriever | None
    top_n: int

    def rerank(self, query: str, documents: list[str]) -> list[float | None]: ...

    def rerank_many(self, requests: list[tuple[str, list[str]]]) -> list[list[float | None]]: ...


@runtime_checkable
class JudgeEnsemble(Model, Protocol):
    """LLMs judging together (kind ensemble): built members and the rule combining them."""

    members: Sequence[ChatModel]
    combine: str


# Fixture `judge`: any model that can compare two documents for a query.
Judge = ChatModel | Retriever | JudgeEnsemble
