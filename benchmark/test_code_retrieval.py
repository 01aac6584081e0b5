"""Code retrieval: can a model find the code that answers a question in a real codebase?

Cases: benchmark/data/code_retrieval_data.yaml. Corpus: plugin/families/code_corpus.py.
Chunking: plugin/families/chunking.py. Ranking and scoring: plugin/families/code_retrieval.py.
"""

from plugin.families import code_retrieval

SCORING_VERSION = code_retrieval.SCORING_VERSION

# The corpus files' paths and contents are part of every result key.
corpus_fingerprint = code_retrieval.corpus_fingerprint


def test_code_retrieval(retriever, case, record):
    """The retriever ranks the corpus's chunks for the query; the expected files, and the
    chunks that hold the answer, should come first."""
    ranking = code_retrieval.search(retriever, case)
    record(code_retrieval.score(case, ranking))
