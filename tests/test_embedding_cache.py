"""The persistent embedding cache, with the real bag-of-words embedder and real SQLite files."""

from __future__ import annotations

import multiprocessing
import sqlite3
from typing import Any

import numpy as np
from dense_words import DenseWordsSpec
from project import bag_of_words, counting_bag_of_words

from ragmatrix.models.embedding_cache import EmbeddingCache
from ragmatrix.models.registry import Registry
from ragmatrix.models.spec import ModelSpec

DOCUMENTS = ["red apples", "blue sky", "green grass", "red apples", "apples are red"]


def bow_spec(**fields) -> ModelSpec:
    return ModelSpec(**{"id": "bow", "kind": "embedder", "builtin": "bow", **fields})


def CountingBow(spec: ModelSpec, cache: EmbeddingCache | None = None) -> Any:
    """The bag-of-words embedder, recording every batch the cache lets through to the model
    (`model.provider.batches`)."""
    return bag_of_words(spec, cache, counting_bag_of_words())


def test_cached_rows_equal_uncached_rows_in_input_order(tmp_path):
    plain = bag_of_words(bow_spec())
    cached = bag_of_words(bow_spec(), EmbeddingCache(tmp_path))
    expected = plain.embed_documents(DOCUMENTS)
    for _ in range(2):  # filling the cache, then reading it
        got = cached.embed_documents(DOCUMENTS)
        assert got.dtype == np.float32 and got.shape == expected.shape
        assert np.allclose(got, expected)
    partial = cached.embed_documents(["a new text", "blue sky", "another one"])
    assert np.allclose(partial, plain.embed_documents(["a new text", "blue sky", "another one"]))
    assert np.allclose(cached.embed_queries(["red apples"])[0], plain.embed_queries(["red apples"])[0])
    assert cached.similarities("red apples", DOCUMENTS) == plain.similarities("red apples", DOCUMENTS)


def test_a_second_call_and_a_second_run_embed_nothing(tmp_path):
    cache = EmbeddingCache(tmp_path)
    first = CountingBow(bow_spec(), cache)
    first.embed_documents(DOCUMENTS)
    assert cache.embedded == 4 and cache.hits == 0
    first.embed_documents(DOCUMENTS)
    assert cache.embedded == 4 and cache.hits == 4 and len(first.provider.batches) == 1
    cache.close()

    again = EmbeddingCache(tmp_path)  # another run, on the same file
    second = CountingBow(bow_spec(), again)
    rows = second.embed_documents(DOCUMENTS)
    assert second.provider.batches == [] and again.embedded == 0 and again.hits == 4
    assert np.allclose(rows, bag_of_words(bow_spec()).embed_documents(DOCUMENTS))
    assert len(again) == 4


def test_duplicates_are_embedded_once_and_misses_in_one_batch(tmp_path):
    cache = EmbeddingCache(tmp_path)
    model = CountingBow(bow_spec(), cache)
    model.embed_documents(["blue sky"])
    model.embed_documents(["x y", "blue sky", "x y", "z", "blue sky", "z"])
    assert model.provider.batches == [["blue sky"], ["x y", "z"]]
    assert cache.embedded == 3 and cache.hits == 1
    without_cache = CountingBow(bow_spec())
    rows = without_cache.embed_queries(["a", "b", "a"])
    assert without_cache.provider.batches == [["a", "b"]] and np.allclose(rows[0], rows[2])


def test_prefixes_and_model_specs_do_not_share_entries(tmp_path):
    cache = EmbeddingCache(tmp_path)
    prefixed = CountingBow(bow_spec(query_prefix="query: ", document_prefix="passage: "), cache)
    prefixed.embed_documents(["red apples"])
    prefixed.embed_queries(["red apples"])
    assert prefixed.provider.batches == [["passage: red apples"], ["query: red apples"]]
    other_length = CountingBow(bow_spec(max_seq_length=64), cache)
    other_length.embed_documents(["red apples"])
    plain = CountingBow(bow_spec(), cache)
    plain.embed_queries(["red apples"])
    plain.embed_documents(["red apples"])
    assert other_length.provider.batches == [["red apples"]] and plain.provider.batches == [["red apples"]]
    assert len(cache) == 4 and cache.hits == 1


def test_the_registry_gives_embedders_one_cache_when_caching(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMATRIX_CACHE_DIR", str(tmp_path))
    registry = Registry(use_cache=True)
    a, b = (registry.build(DenseWordsSpec(id=name, kind="embedder")) for name in ("a", "b"))
    assert isinstance(a.cache, EmbeddingCache) and a.cache is b.cache
    assert a.cache.path == tmp_path / "embeddings.sqlite"
    a.embed_documents(["red apples"])
    b.embed_documents(["red apples"])  # same fingerprint: the id is not part of it
    assert a.cache.embedded == 1 and a.cache.hits == 1
    registry.close()
    assert Registry(use_cache=False).build(DenseWordsSpec(id="a", kind="embedder")).cache is None
    # the bag-of-words baseline keeps none: counting a text's words is cheaper than reading 16 KB back
    assert Registry(use_cache=True).build(bow_spec()).cache is None


def _write(directory: str, worker: int) -> None:
    cache = EmbeddingCache(directory)
    model = bag_of_words(bow_spec(), cache)
    for round_ in range(20):
        # Overlapping batches: both processes write many of the same keys at the same time.
        model.embed_documents([f"text {i} of round {round_ % 5} {'w' * (i % 3)}" for i in range(worker, 100 + worker)])
    cache.close()


def test_two_processes_writing_one_cache_do_not_corrupt_it(tmp_path):
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_write, args=(str(tmp_path), w)) for w in (0, 1)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
        assert process.exitcode == 0
    with sqlite3.connect(tmp_path / "embeddings.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    texts = sorted({f"text {i} of round {r} {'w' * (i % 3)}" for r in range(5) for i in range(101)})
    cache = EmbeddingCache(tmp_path)
    assert len(cache) == len(texts)
    model = CountingBow(bow_spec(), cache)
    rows = model.embed_documents(texts)
    assert model.provider.batches == [] and cache.hits == len(texts)
    assert np.allclose(rows, bag_of_words(bow_spec()).embed_documents(texts))
