"""Builds each model of the matrix once per process, when the first test that needs it runs."""

from __future__ import annotations

from typing import Any

from plugin.models.client import ModelError
from plugin.models.spec import ModelSpec
from plugin.secrets import redact


class Registry:
    def __init__(self, use_cache: bool = True) -> None:
        self.use_cache = use_cache
        self._built: dict[str, Any] = {}
        self._failed: dict[str, str] = {}
        self._response_cache: Any = None
        self._embedding_cache: Any = None

    def build(self, spec: ModelSpec) -> Any:
        if spec.id in self._built:
            return self._built[spec.id]
        if spec.id in self._failed:  # do not retry a load that failed for every test
            raise ModelError(self._failed[spec.id])
        try:
            model = self._construct(spec)
        except ModelError as error:
            self._failed[spec.id] = str(error)
            raise
        except Exception as error:
            message = redact(f"cannot load model '{spec.id}': {type(error).__name__}: {error}".splitlines()[0])
            self._failed[spec.id] = message
            raise ModelError(message) from error
        self._built[spec.id] = model
        return model

    def _construct(self, spec: ModelSpec) -> Any:
        if spec.ensemble is not None:
            from plugin.models.ensemble import Ensemble

            return Ensemble(spec, [self.build(member) for member in spec.members])
        if spec.xinference:
            from plugin.models import xinference_provider

            if spec.kind == "llm":  # found or launched now, on the server
                return xinference_provider.XinferenceChatModel(spec, self.response_cache())
            return xinference_provider.XinferenceEmbedder(spec, self.embedding_cache())
        if spec.kind == "embedder" and spec.litellm:
            from plugin.models.litellm_embedder import LitellmEmbedder

            return LitellmEmbedder(spec, self.embedding_cache())
        if spec.kind == "llm":
            from plugin.models.chat import ChatModel
            from plugin.models.litellm_provider import LitellmChat

            return ChatModel(spec, LitellmChat(spec), self.response_cache())
        if spec.builtin == "bow":
            from plugin.models.lexical import HashingBagOfWords

            return HashingBagOfWords(spec, self.embedding_cache())
        if spec.builtin == "bm25":
            from plugin.models.bm25 import BM25Retriever

            return BM25Retriever(spec)
        if spec.sentence_transformers:
            from plugin.models.sentence_transformers_provider import SentenceTransformerEmbedder

            return SentenceTransformerEmbedder(spec, self.embedding_cache())
        raise ModelError(f"model '{spec.id}': no backend for {spec.provider} {spec.kind}s yet")

    def response_cache(self) -> Any:
        if not self.use_cache:
            return None
        if self._response_cache is None:
            from plugin.cache import SqliteCache

            self._response_cache = SqliteCache("responses")
        return self._response_cache

    def embedding_cache(self) -> Any:
        if not self.use_cache:
            return None
        if self._embedding_cache is None:
            from plugin.models.embedding_cache import EmbeddingCache

            self._embedding_cache = EmbeddingCache()
        return self._embedding_cache

    def close(self) -> None:
        for model in self._built.values():
            close = getattr(model, "close", None)
            if close is not None:
                close()
        self._built.clear()
        if self._response_cache is not None:
            self._response_cache.close()
            self._response_cache = None
        if self._embedding_cache is not None:
            self._embedding_cache.close()
            self._embedding_cache = None
