"""Text retrieval: does a model rank the judged documents of a BEIR-format dataset first?

Cases: benchmark/data/text_retrieval_data.yaml. The family: ragmatrix/families/text_retrieval/.
"""

from ragmatrix.families import text_retrieval


def test_text_retrieval(retriever, case, record):
    """The retriever ranks the dataset's corpus for the query; graded qrels score the top 10."""
    ranking = text_retrieval.search(retriever, case)
    record(text_retrieval.score(case, ranking))
