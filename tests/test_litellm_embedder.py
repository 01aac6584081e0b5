"""Embeddings through real litellm against the local OpenAI-compatible server."""

from __future__ import annotations

import numpy as np
import pytest
from project import server_spec

from ragmatrix.models.client import ModelError
from ragmatrix.models.embedder import EmbeddingModel
from ragmatrix.models.embedding_cache import EmbeddingCache
from ragmatrix.models.providers.litellm_embedder import LitellmEmbedding
from ragmatrix.testing.openai_server import Reply, embed_text

# Each test closes the process's event loop and the HTTP clients bound to it.
pytestmark = pytest.mark.usefixtures("fresh_event_loop")


def embedder(server, cache=None, **settings) -> EmbeddingModel:
    spec = server_spec(server, "embedder", "test-embed", **{"timeout": 2.0, "batch_size": 4, **settings})
    return EmbeddingModel(spec, LitellmEmbedding(spec), cache)


def test_texts_are_embedded_in_batches_in_order_and_normalised(server):
    texts = [f"text number {i}" for i in range(10)]
    vectors = embedder(server).embed_documents(texts)
    assert server.count("embeddings") == 3  # batches of 4, 4 and 2
    assert vectors.shape == (10, server.embedding_dim) and vectors.dtype == np.float32
    assert np.allclose(vectors, np.asarray([embed_text(t, server.embedding_dim) for t in texts]), atol=1e-6)


def test_a_429_is_retried_and_a_persistent_500_is_a_model_error(server):
    server.inject(Reply.error(429, retry_after=0.2))
    assert embedder(server).embed_documents(["a"]).shape == (1, server.embedding_dim)
    assert server.count("embeddings") == 2
    server.reset()
    server.inject(*[Reply.error(500)] * 5)
    with pytest.raises(ModelError, match="HTTP 500"):
        embedder(server, retries=1).embed_documents(["b"])
    assert server.count("embeddings") == 2


def test_the_cache_keeps_a_text_from_being_sent_twice(server, tmp_path):
    cache = EmbeddingCache(tmp_path)
    first = embedder(server, cache).embed_queries(["alpha", "beta", "alpha"])
    again = embedder(server, cache).embed_queries(["beta", "alpha"])
    assert server.count("embeddings") == 1
    assert np.allclose(first[[1, 0]], again)
    assert (cache.embedded, cache.hits) == (2, 2)
