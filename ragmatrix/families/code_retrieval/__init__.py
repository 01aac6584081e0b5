"""Code retrieval: can a model find the code that answers a question in a real codebase?

- `corpus`: which files a case reads, listed once per session, and their fingerprint;
- `chunking`: lines, syntax-tree definitions (capped), or bounded syntax-aware chunks;
- `query_file`: the Rust embedding benchmark's query files, each query a case;
- `retrieval`: the index, the ranking and the file- and answer-level scores;
- `breakdowns`: rows grouped by query type, difficulty or tag;
- `report`: the Rust embedding benchmark's table, quality beside embeddings per second.
"""

from ragmatrix.families.base import Family, Headline
from ragmatrix.families.code_retrieval.corpus import forget
from ragmatrix.families.code_retrieval.query_file import expand_query_file
from ragmatrix.families.code_retrieval.report import speed_table
from ragmatrix.families.code_retrieval.retrieval import (
    SCORING_VERSION,
    CodeRetrievalCase,
    check,
    corpus_fingerprint,
    score,
    search,
)

__all__ = ["FAMILY", "score", "search"]

FAMILY = Family(
    name="code_retrieval",
    scoring_version=SCORING_VERSION,
    case_schema=CodeRetrievalCase,
    headline=Headline("file nDCG@10", "file-level nDCG@10"),
    # The corpus is one mapping, not a set of variants.
    plain_input_fields=("corpus",),
    corpus_fingerprint=corpus_fingerprint,
    binary_metrics=("answer_hit_at_1", "answer_hit_at_3", "answer_hit_at_5", "precision_at_1"),
    # Every row's iterations hold `query_type`, `difficulty` and `tags` (see `score`).
    breakdowns=("query_type", "difficulty", "tags"),
    case_source=expand_query_file,
    check=check,
    new_session=forget,
    cost_sections=(speed_table,),
)
