"""The bag-of-words baseline keeps no vectors: a corpus is indexed as sparse rows whose scores
are the dense product's, and each query it scores is timed as it runs."""

from __future__ import annotations

import random

import numpy as np
from project import bag_of_words

from ragmatrix.cost.meter import Meter, Work, current_meter, current_work
from ragmatrix.models.embedder import ProviderIndex, normalise_rows
from ragmatrix.models.lexical import DIMENSIONS, HashingBagOfWords, SparseRows

WORDS = "parse json encode decode socket thread queue lock event loop file path read write error".split()


def corpus(count: int, seed: int = 1) -> list[str]:
    chosen = random.Random(seed)
    return [" ".join(chosen.choice(WORDS) for _ in range(chosen.randint(0, 30))) for _ in range(count)]


def test_sparse_rows_score_as_the_dense_product_of_the_same_unit_rows():
    documents = [*corpus(700), "", "   "]  # more than one block, and documents with no word at all
    queries = ["parse a json file", "thread lock", "nothing known here"]
    model = HashingBagOfWords()
    rows = SparseRows.of(model, documents)
    dense = normalise_rows(model.embed(documents))
    assert len(rows) == len(documents) and len(rows.values) == np.count_nonzero(dense)
    for query in queries:
        row = normalise_rows(model.embed([query]))[0]
        np.testing.assert_allclose(rows.scores(row), dense @ row, rtol=1e-6, atol=1e-7)
    assert rows.scores(normalise_rows(model.embed(["json"]))[0])[-2:].tolist() == [0.0, 0.0]


def test_an_index_holds_a_few_bytes_per_document_not_a_dense_row():
    index = bag_of_words().index_documents(corpus(500))
    assert isinstance(index, ProviderIndex)
    held = index.rows.values.nbytes + index.rows.documents.nbytes + index.rows.starts.nbytes
    assert held < 500 * DIMENSIONS * 4 / 20  # a dense float32 row per document would be 20 times more


def test_each_query_scored_is_timed_as_it_runs_and_none_again():
    meter = Meter(None)
    tokens = current_meter.set(meter), current_work.set(Work("code_retrieval"))
    try:
        model = bag_of_words()
        scores = model.index_documents(corpus(50)).score(["parse json", "event loop", "read a file"])
    finally:
        current_work.reset(tokens[1])
        current_meter.reset(tokens[0])
    assert scores.shape == (3, 50)
    (record,) = meter.take()
    assert record.queries.count == 3 and record.load_average is not None
