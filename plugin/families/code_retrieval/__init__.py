"""Code retrieval: can a model find the code that answers a question in a real codebase?

- `corpus`: which files a case reads, and their fingerprint;
- `chunking`: lines, syntax-tree definitions, or bounded syntax-aware chunks;
- `retrieval`: the index, the ranking and the file- and answer-level scores.
"""

from plugin.families.base import Family, Headline
from plugin.families.code_retrieval.retrieval import (
    SCORING_VERSION,
    CodeRetrievalCase,
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
)
