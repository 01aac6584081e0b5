"""Per-item context for model calls: which sample is being drawn, and what it cost."""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any


@dataclass
class Usage:
    """Calls and tokens of one benchmark item. Cost stays unknown (None) unless every priced
    call could be priced: a partial sum would look like a real total."""

    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    texts_embedded: int = 0  # texts sent to an embedding model
    embedding_cache_hits: int = 0  # texts served from the embedding cache, stored by an earlier run
    embedding_shared: int = 0  # texts served from the embedding cache, stored earlier in this run
    answers_cut: int = 0  # answers longer than the stored maximum, kept only in part
    documents_reranked: int = 0  # (query, document) pairs a reranker scored
    rerank_cache_hits: int = 0  # pairs whose score came from the rerank cache
    search_units: int = 0  # searches a rerank API billed
    tokens_counted: int = 0  # calls whose server reported no tokens: counted with litellm's tokenizer
    # The evaluator's share of the calls and tokens above: another model's, not the item's own.
    evaluator_calls: int = 0
    evaluator_prompt_tokens: int = 0
    evaluator_completion_tokens: int = 0

    def add(self, usage: dict[str, Any] | None, cost: float | None, cached: bool) -> None:
        self.calls += 1
        self.cached_calls += int(cached)
        usage = usage or {}
        self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        self.completion_tokens += int(usage.get("completion_tokens") or 0)
        self.tokens_counted += int(usage.get("counted") or 0)
        if cost is None or self.cost_usd is None:
            self.cost_usd = None
        else:
            self.cost_usd += cost

    def add_evaluator(self, evaluator: Usage) -> None:
        """The evaluator's calls of this item: in the totals, and apart, so that the item's own
        model is not charged for them."""
        self.calls += evaluator.calls
        self.cached_calls += evaluator.cached_calls
        self.prompt_tokens += evaluator.prompt_tokens
        self.completion_tokens += evaluator.completion_tokens
        self.tokens_counted += evaluator.tokens_counted
        if evaluator.cost_usd is None or self.cost_usd is None:
            self.cost_usd = None if evaluator.calls else self.cost_usd
        else:
            self.cost_usd += evaluator.cost_usd
        self.evaluator_calls += evaluator.calls
        self.evaluator_prompt_tokens += evaluator.prompt_tokens
        self.evaluator_completion_tokens += evaluator.completion_tokens

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "calls": self.calls,
            "cached_calls": self.cached_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }
        if self.cost_usd is not None and self.calls:
            data["cost_usd"] = round(self.cost_usd, 8)
        if self.texts_embedded or self.embedding_cache_hits or self.embedding_shared:
            data["texts_embedded"] = self.texts_embedded
            data["embedding_cache_hits"] = self.embedding_cache_hits
            data["embedding_shared"] = self.embedding_shared
        if self.documents_reranked or self.rerank_cache_hits:
            data["documents_reranked"] = self.documents_reranked
            data["rerank_cache_hits"] = self.rerank_cache_hits
        if self.search_units:
            data["search_units"] = self.search_units
        if self.answers_cut:
            data["answers_cut"] = self.answers_cut
        if self.tokens_counted:
            data["tokens_counted"] = self.tokens_counted
        if self.evaluator_calls:
            data["evaluator_calls"] = self.evaluator_calls
            data["evaluator_prompt_tokens"] = self.evaluator_prompt_tokens
            data["evaluator_completion_tokens"] = self.evaluator_completion_tokens
        return data


# The iteration being run: the response cache keys on it, so iteration 2 is a fresh sample.
current_sample: ContextVar[int] = ContextVar("current_sample", default=0)
current_usage: ContextVar[Usage | None] = ContextVar("current_usage", default=None)
# The conversations the scheduler sent ahead for the item being run, the very objects the
# models keyed them by: the item's test builds equal ones anew, and finding them here spares
# working out each one's key again.
current_requests: ContextVar[Sequence[Any]] = ContextVar("current_requests", default=())
