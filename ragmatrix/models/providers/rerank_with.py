"""`rerank_with: <id>` with `kind: reranker`: another model of models.yaml used as a reranker.

- an embedder scores each document by the cosine of its vector to the query's (its prefixes
  applied), both embedded afresh by the model: the reranker's work is timed as its own;
- a retriever (BM25) scores the documents among themselves: its statistics are those of the
  documents it reranks;
- an LLM reads each document with the query and gives it a relevance from 0 to 10 (`prompt:`
  replaces the instruction). An answer that holds no such score is asked again once, saying
  what was wrong; if that fails too, the document has no relevance (None), which makes the
  ranking invalid, never a score.

These are the baselines a trained reranker must beat. The model is named in the reranker's key
by its own output fingerprint (and an LLM's prompt), so editing it reruns the reranker.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast

from pydantic import Field, PrivateAttr

from ragmatrix.cost.device import Device, this_cpu
from ragmatrix.models import aio
from ragmatrix.models.providers import provider
from ragmatrix.models.reranker import Relevances, RerankModel, RerankProvider
from ragmatrix.models.scored_answer import parse_verdict
from ragmatrix.models.spec import ID_PATTERN, ModelSpec, RerankerSpec
from ragmatrix.models.usage import current_usage

if TYPE_CHECKING:
    from ragmatrix.models.embedder import EmbeddingModel
    from ragmatrix.models.protocols import ChatModel, Messages, Model, Retriever
    from ragmatrix.models.spec import ModelBuilder

LOWEST, HIGHEST = 0.0, 10.0
DEFAULT_PROMPT = (
    "You judge how relevant a document is to a search query: how well it answers what a person "
    "asking the query wants to know. A document that is on the topic, or repeats the query's words, "
    "but does not help answer it is not relevant.\n\n"
    'Reply with one JSON object and nothing else: {"reasoning": "<one or two sentences>", '
    '"score": <a number from 0 to 10>}, where 0 means the document is off the topic or no help at '
    "all, and 10 means it answers the query fully and directly."
)
RETRY_PROMPT = (
    "Your answer could not be read ({problem}). Answer again in the format the instructions ask "
    "for: your reasoning, then a score from 0 to 10."
)


@provider("rerank_with")
class RerankWithSpec(RerankerSpec):
    provider: Literal["rerank_with"] = "rerank_with"
    key: ClassVar[str | None] = "rerank_with"
    kinds: ClassVar[tuple[str, ...]] = ("reranker",)
    rank: ClassVar[int] = 35
    describe: ClassVar[str] = "rerank_with (another model of the file)"
    names: ClassVar[frozenset[str]] = RerankerSpec.names | {"rerank_with"}
    rerank_with: str = Field(pattern=ID_PATTERN)  # an llm, embedder or retriever of this file
    prompt: str | None = None  # an LLM's instruction (part of the key); the default otherwise

    _scorer: ModelSpec | None = PrivateAttr(default=None)

    def uses(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        kinds = ("llm",) if self.prompt is not None else ("llm", "embedder", "retriever")
        return {**super().uses(), "rerank_with": (self.rerank_with, kinds)}

    def attach(self, field: str, spec: ModelSpec) -> None:
        super().attach(field, spec)
        if field == "rerank_with":
            self._scorer = spec

    def unavailable(self, probe: bool = True) -> str | None:
        if self._scorer is not None:
            reason = self._scorer.unavailable(probe)
            if reason:
                return f"{self._scorer.id}: {reason}"
        return super().unavailable(probe)

    def scorer_fingerprint(self) -> dict[str, Any]:
        scorer = self._scorer
        found: dict[str, Any] = {
            "provider": "rerank_with",
            "model": scorer.output_fingerprint() if scorer is not None else self.rerank_with,
        }
        if scorer is None or scorer.kind == "llm":
            found["prompt"] = self.prompt or DEFAULT_PROMPT
        return found

    def build(self, models: ModelBuilder) -> Model:
        if self._scorer is None:
            raise ValueError(f"rerank_with '{self.rerank_with}' is not attached: read the entry from a models file")
        scorer = models.build(self._scorer)
        chosen: RerankProvider
        if self._scorer.kind == "llm":
            chosen = PointwiseLLM(cast("ChatModel", scorer), self.prompt or DEFAULT_PROMPT)
        elif self._scorer.kind == "embedder":
            chosen = CosineReranker(cast("EmbeddingModel", scorer))
        else:
            chosen = LexicalReranker(cast("Retriever", scorer))
        return RerankModel.built(self, models, chosen)


class CosineReranker(RerankProvider):
    """The cosine of each document's vector to the query's, embedded afresh by the embedder."""

    delegates = True  # the embedder's own wrapper sends its requests, on a server

    def __init__(self, embedder: EmbeddingModel) -> None:
        self.embedder = embedder

    def load(self) -> None:
        self.embedder.prepare_to_measure()  # loaded and warmed up: neither is a reranking

    def score(self, query: str, documents: list[str]) -> list[float]:
        spec = self.embedder.spec
        rows = self.embedder.encode_fresh([spec.query_prefix + query] + [spec.document_prefix + d for d in documents])
        return [float(x) for x in rows[1:] @ rows[0]]

    def device(self) -> Device:
        return self.embedder.cost_device()

    def model_size(self) -> tuple[float | None, int | None]:
        return self.embedder.model_size()


class LexicalReranker(RerankProvider):
    """BM25 over the documents being reranked (any other retriever: its similarities)."""

    def __init__(self, retriever: Retriever) -> None:
        self.retriever = retriever

    def score(self, query: str, documents: list[str]) -> list[float]:
        from ragmatrix.models.bm25 import BM25Index, BM25Retriever

        if isinstance(self.retriever, BM25Retriever):  # not the retriever's own work: no cost of its
            return [float(x) for x in BM25Index(documents).score([query])[0]]
        return [float(x) for x in self.retriever.similarities(query, documents)]

    def device(self) -> Device:
        return this_cpu()


def pointwise_messages(prompt: str, query: str, document: str) -> Messages:
    """The instruction as the system message; the query and the document as the user's."""
    return [
        {"role": "system", "content": prompt},
        {"role": "user", "content": f"Query: {query}\n\nDocument:\n{document}"},
    ]


class PointwiseLLM(RerankProvider):
    """Each document read with the query by an LLM of the file, all at once (the LLM's
    concurrency bounds what is in flight); the LLM's wrapper caches, retries and counts."""

    delegates = True

    def __init__(self, llm: ChatModel, prompt: str) -> None:
        self.llm = llm
        self.prompt = prompt

    def score(self, query: str, documents: list[str]) -> Relevances:
        usage = current_usage.get()
        replays = usage.cached_calls if usage is not None else 0

        async def every() -> list[float | None]:
            return list(await asyncio.gather(*(self._relevance(query, d) for d in documents)))

        scores = aio.run(every())
        # Answers the response cache replayed are no latency of the model's.
        return Relevances(scores, replayed=usage is not None and usage.cached_calls > replays)

    async def _relevance(self, query: str, document: str) -> float | None:
        messages = pointwise_messages(self.prompt, query, document)
        answer = await self.llm.achat(messages)
        verdict = parse_verdict(answer, LOWEST, HIGHEST)
        if verdict.problem is None:
            return verdict.score
        # A real second request: the conversation differs, so the cache cannot replay the first.
        again = [
            *messages,
            {"role": "assistant", "content": answer},
            {"role": "user", "content": RETRY_PROMPT.format(problem=verdict.problem)},
        ]
        return parse_verdict(await self.llm.achat(again), LOWEST, HIGHEST).score

    def device(self) -> Device:
        cost_device = getattr(self.llm, "cost_device", None)
        return cost_device() if cost_device is not None else Device("remote", local=False)
