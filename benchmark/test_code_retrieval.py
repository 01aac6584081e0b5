"""Code retrieval: can a model find the code that answers a question in a real codebase?

Cases: benchmark/data/code_retrieval_data.yaml. The family: ragmatrix/families/code_retrieval/.
"""

from ragmatrix.families import code_retrieval


def test_code_retrieval(retriever, case, record):
    """The retriever ranks the corpus's chunks for the query; the expected files, and the
    chunks that hold the answer, should come first."""
    ranking = code_retrieval.search(retriever, case)
    record(code_retrieval.score(case, ranking))
