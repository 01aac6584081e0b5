"""The public face for provider authors: everything a provider module imports.

A provider declares a spec model (a `ModelSpec` subclass registered with `@provider`) whose
`build` wraps a small provider object in the one wrapper of its kind:

- chat: a `ChatProvider` (`complete` one request, `classify` a failure) in an `LLM`;
- embeddings: an `EmbeddingProvider` (`embed` a batch in this process, or `aembed` it on a
  server; `classify`; `device`) in an `EmbeddingModel`;
- reranking: a `RerankProvider` (`score` a query against documents in this process, or
  `ascore` them on a server; `classify`; `device`) in a `RerankModel`, its spec a `RerankerSpec`.

The wrapper owns concurrency, timeouts, retries, the breaker with its probe, the throttle (429s, busy servers),
the caches, usage, redaction and the cost figures, so a provider does none of it. See
docs/extending-providers.md; every other module of the package is private and may change. The
names are imported on first use, so importing this module stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragmatrix.cost.device import Device, remote, this_cpu
    from ragmatrix.foundations.secrets import redact
    from ragmatrix.models.aio import at_close, run
    from ragmatrix.models.chat import LLM, ChatProvider
    from ragmatrix.models.client import EmptyAnswer, Failure, ModelError
    from ragmatrix.models.embedder import EmbeddingModel, EmbeddingProvider
    from ragmatrix.models.http import BadResponse, HttpSession, StatusError
    from ragmatrix.models.http import classify as classify_http
    from ragmatrix.models.protocols import ChatModel, Embedder, Messages, Model, Reranker, Retriever
    from ragmatrix.models.providers import provider
    from ragmatrix.models.reranker import Relevances, RerankModel, RerankProvider
    from ragmatrix.models.spec import (
        EmbedderSpec,
        ModelBuilder,
        ModelSpec,
        RerankerSpec,
        TextSpec,
        expand_env,
        probe_server,
    )

# Each public name, the module that defines it, and its name there.
_HOMES = {
    "BadResponse": ("ragmatrix.models.http", "BadResponse"),
    "ChatModel": ("ragmatrix.models.protocols", "ChatModel"),
    "ChatProvider": ("ragmatrix.models.chat", "ChatProvider"),
    "Device": ("ragmatrix.cost.device", "Device"),
    "Embedder": ("ragmatrix.models.protocols", "Embedder"),
    "EmbedderSpec": ("ragmatrix.models.spec", "EmbedderSpec"),
    "EmbeddingModel": ("ragmatrix.models.embedder", "EmbeddingModel"),
    "EmbeddingProvider": ("ragmatrix.models.embedder", "EmbeddingProvider"),
    "EmptyAnswer": ("ragmatrix.models.client", "EmptyAnswer"),
    "Failure": ("ragmatrix.models.client", "Failure"),
    "HttpSession": ("ragmatrix.models.http", "HttpSession"),
    "LLM": ("ragmatrix.models.chat", "LLM"),
    "Messages": ("ragmatrix.models.protocols", "Messages"),
    "Model": ("ragmatrix.models.protocols", "Model"),
    "ModelBuilder": ("ragmatrix.models.spec", "ModelBuilder"),
    "ModelError": ("ragmatrix.models.client", "ModelError"),
    "ModelSpec": ("ragmatrix.models.spec", "ModelSpec"),
    "Relevances": ("ragmatrix.models.reranker", "Relevances"),
    "RerankModel": ("ragmatrix.models.reranker", "RerankModel"),
    "RerankProvider": ("ragmatrix.models.reranker", "RerankProvider"),
    "Reranker": ("ragmatrix.models.protocols", "Reranker"),
    "RerankerSpec": ("ragmatrix.models.spec", "RerankerSpec"),
    "Retriever": ("ragmatrix.models.protocols", "Retriever"),
    "StatusError": ("ragmatrix.models.http", "StatusError"),
    "TextSpec": ("ragmatrix.models.spec", "TextSpec"),
    "at_close": ("ragmatrix.models.aio", "at_close"),
    "classify_http": ("ragmatrix.models.http", "classify"),
    "expand_env": ("ragmatrix.models.spec", "expand_env"),
    "probe_server": ("ragmatrix.models.spec", "probe_server"),
    "provider": ("ragmatrix.models.providers", "provider"),
    "redact": ("ragmatrix.foundations.secrets", "redact"),
    "remote": ("ragmatrix.cost.device", "remote"),
    "run": ("ragmatrix.models.aio", "run"),
    "this_cpu": ("ragmatrix.cost.device", "this_cpu"),
}

__all__ = [
    "BadResponse",
    "ChatModel",
    "ChatProvider",
    "Device",
    "Embedder",
    "EmbedderSpec",
    "EmbeddingModel",
    "EmbeddingProvider",
    "EmptyAnswer",
    "Failure",
    "HttpSession",
    "LLM",
    "Messages",
    "Model",
    "ModelBuilder",
    "ModelError",
    "ModelSpec",
    "Relevances",
    "RerankModel",
    "RerankProvider",
    "Reranker",
    "RerankerSpec",
    "Retriever",
    "StatusError",
    "TextSpec",
    "at_close",
    "classify_http",
    "expand_env",
    "probe_server",
    "provider",
    "redact",
    "remote",
    "run",
    "this_cpu",
]


def __getattr__(name: str) -> Any:
    from ragmatrix.foundations.lazy import resolve

    return resolve(globals(), _HOMES, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
