"""An LLM as a benchmark test sees it: `llm.chat(messages)` returns the answer text.

Behind that one call: the response cache (keyed by model spec, messages, generation
parameters and sample index), the concurrency limit, timeouts, retries, and token and
cost accounting for the item being run.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from plugin.cache import SqliteCache
from plugin.keys import md5_of
from plugin.models import aio
from plugin.models.client import Failure, RetryPolicy, call
from plugin.models.spec import ModelSpec
from plugin.models.usage import current_sample, current_usage

Messages = list[dict[str, str]]


class ChatProvider(Protocol):
    async def complete(self, messages: Messages, timeout: float) -> tuple[str, dict[str, Any], float | None]: ...

    def classify(self, error: BaseException) -> Failure: ...


class ChatModel:
    kind = "llm"

    def __init__(self, spec: ModelSpec, provider: ChatProvider, cache: SqliteCache | None) -> None:
        self.spec = spec
        self.id = spec.id
        self.provider = provider
        self.cache = cache
        self.policy = RetryPolicy(retries=spec.retries)
        self._semaphore: asyncio.Semaphore | None = None

    @property
    def semaphore(self) -> asyncio.Semaphore:
        # Created lazily so that it belongs to the loop the calls run on.
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.spec.concurrency)
        return self._semaphore

    def cache_key(self, messages: Messages, sample: int) -> str:
        return md5_of({"model": self.spec.output_fingerprint(), "messages": messages, "sample": sample})

    async def achat(self, messages: Messages, sample: int | None = None) -> str:
        sample = current_sample.get() if sample is None else sample
        key = self.cache_key(messages, sample)
        usage = current_usage.get()
        hit = self.cache.get(key) if self.cache is not None else None
        if hit is not None:
            if usage is not None:
                usage.add(hit.get("usage"), hit.get("cost"), cached=True)
            return str(hit["text"])
        text, tokens, cost = await call(
            lambda: self.provider.complete(messages, self.spec.timeout),
            semaphore=self.semaphore,
            timeout=self.spec.timeout,
            policy=self.policy,
            classify=self.provider.classify,
        )
        if usage is not None:
            usage.add(tokens, cost, cached=False)
        if self.cache is not None:
            self.cache.put(key, {"text": text, "usage": tokens, "cost": cost})
        return text

    def chat(self, messages: Messages) -> str:
        """Ask once, for the current iteration's sample."""
        return aio.run(self.achat(messages))

    def chat_many(self, conversations: list[Messages]) -> list[str]:
        """Ask many at once; the model's concurrency limit bounds how many are in flight."""

        async def gather() -> list[str]:
            return list(await asyncio.gather(*(self.achat(m) for m in conversations)))

        return aio.run(gather())
